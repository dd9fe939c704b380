//! The numbers inside a prompt-too-long answer: how large the refused request was and the
//! limit the provider enforces. Providers word this differently; each pattern below is one
//! wording seen from a provider or local server. A session learns the limit from the first
//! refusal and keeps every later request under it.

use std::sync::LazyLock;

use regex::Regex;

/// What a prompt-too-long answer says about sizes (tokens).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ContextLimit {
    /// Tokens of the refused request's input, as the provider counted them (a lower bound
    /// for some servers).
    pub request_tokens: Option<u64>,
    /// The most input tokens the provider accepts: its window, less the requested output
    /// where the provider counts that in.
    pub limit_tokens: Option<u64>,
}

/// Each wording with named groups: `req` (input tokens), `lim` (the window), `out` (output
/// tokens the window must also hold), `total` (input + output when only that is given).
static PATTERNS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        // Anthropic: "prompt is too long: 208310 tokens > 200000 maximum".
        r"prompt is too long: (?P<req>\d+) tokens > (?P<lim>\d+) maximum",
        // Anthropic: "input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000".
        r"exceed context limit: (?P<req>\d+) \+ (?P<out>\d+) > (?P<lim>\d+)",
        // vLLM: "… maximum context length is 4096 tokens. However, you requested 500 output
        // tokens and your prompt contains at least 3597 input tokens …".
        r"maximum context length is (?P<lim>\d+) tokens\. however you requested (?P<out>\d+) output tokens and your prompt contains (?:at least )?(?P<req>\d+) input tokens",
        // OpenAI, DeepSeek, OpenRouter, older vLLM: "… is 4096 tokens. However, you requested
        // 5000 tokens (4500 in the messages, 500 in the completion)".
        r"maximum context length is (?P<lim>\d+) tokens.*?you requested (?:about )?(?P<total>\d+) tokens \((?P<req>\d+) (?:in the messages|of text input)[^)]*?(?P<out>\d+) in the (?:completion|output)\)",
        // OpenAI: "This model's maximum context length is 128000 tokens. However, your
        // messages resulted in 130000 tokens."
        r"maximum context length is (?P<lim>\d+) tokens.*?(?:your messages resulted in|you requested(?: about)?|your request has) (?P<req>\d+) (?:input )?tokens",
        // OpenAI (gpt-5): "Input tokens exceed the configured limit of 272000 tokens. Your
        // messages resulted in 280000 tokens."
        r"configured limit of (?P<lim>\d+) tokens\.(?: your messages resulted in (?P<req>\d+) tokens)?",
        // llama.cpp: "request (5000 tokens) exceeds the available context size (4096 tokens)".
        r"(?:request|input) \((?P<req>\d+) tokens\) (?:exceeds the available|is larger than the max) context size \((?P<lim>\d+) tokens\)",
        // llama.cpp's error fields.
        r#""n_prompt_tokens"\s*:\s*(?P<req>\d+).*?"n_ctx"\s*:\s*(?P<lim>\d+)"#,
        // vLLM: "You passed 5000 input tokens and requested 500 output tokens. However, the
        // model's context length is only 4096 tokens".
        r"you passed (?P<req>\d+) input tokens and requested (?P<out>\d+) output tokens\. however the model's context length is only (?P<lim>\d+) tokens",
        // vLLM: "Input length (5000) exceeds model's maximum context length (4096)".
        r"input length \((?P<req>\d+)\) exceeds model's maximum context length \((?P<lim>\d+)\)",
        // vLLM alone: "This model's maximum context length is 8192 tokens."
        r"maximum context length is (?P<lim>\d+) tokens",
        // text-generation-inference.
        r"must be <= (?P<lim>\d+)\. given: (?P<req>\d+) `inputs` tokens and (?P<out>\d+) `max_new_tokens`",
        r"`inputs` must have less than (?P<lim>\d+) tokens\. given: (?P<req>\d+)",
        // LM Studio.
        r"keep the first (?P<req>\d+) tokens when context the overflows.*?context length of only (?P<lim>\d+) tokens",
        r"n_keep:? ?\(?(?P<req>\d+)\)? ?>= ?n_ctx:? ?\(?(?P<lim>\d+)\)?",
        // Cerebras: "Current length is 9000 while limit is 8192".
        r"current length is (?P<req>\d+) while limit is (?P<lim>\d+)",
        // Generic: "(5000 tokens > 4096 context)".
        r"(?P<req>\d+) tokens > (?P<lim>\d+)",
    ]
    .iter()
    .filter_map(|p| Regex::new(&format!("(?is){p}")).ok())
    .collect()
});

/// How many wordings `PATTERNS` lists (a test checks that each compiled).
#[cfg(test)]
const PATTERN_COUNT: usize = 17;

/// Reads the sizes out of a prompt-too-long error text; fields stay `None` when the text
/// does not say.
pub fn parse_context_limit(text: &str) -> ContextLimit {
    // Bodies quoted inside JSON strings carry escaped quotes; numbers may carry thousands
    // separators. Commas go, so the patterns hold none.
    let text = text.replace("\\\"", "\"").replace(',', "");
    for re in PATTERNS.iter() {
        let Some(c) = re.captures(&text) else {
            continue;
        };
        let n = |g: &str| c.name(g).and_then(|m| m.as_str().parse::<u64>().ok());
        let Some(lim) = n("lim") else { continue };
        let out = n("out").unwrap_or(0);
        return ContextLimit {
            request_tokens: n("req").or(n("total").map(|t| t.saturating_sub(out))),
            limit_tokens: Some(lim.saturating_sub(out)),
        };
    }
    ContextLimit::default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both(text: &str) -> (Option<u64>, Option<u64>) {
        let l = parse_context_limit(text);
        (l.request_tokens, l.limit_tokens)
    }

    #[test]
    fn every_pattern_compiles() {
        assert_eq!(PATTERNS.len(), PATTERN_COUNT);
    }

    #[test]
    fn anthropic_wordings() {
        assert_eq!(
            both("invalid_request_error: prompt is too long: 208310 tokens > 200000 maximum"),
            (Some(208_310), Some(200_000))
        );
        assert_eq!(
            both(
                "input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000, decrease input length or `max_tokens` and try again"
            ),
            (Some(198_000), Some(191_808))
        );
    }

    #[test]
    fn openai_and_compatible_wordings() {
        assert_eq!(
            both(
                "context_length_exceeded: This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages."
            ),
            (Some(130_000), Some(128_000))
        );
        assert_eq!(
            both(
                "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4500 in the messages, 500 in the completion). Please reduce the length of the messages or completion."
            ),
            (Some(4_500), Some(3_596))
        );
        assert_eq!(
            both(
                "This endpoint's maximum context length is 8192 tokens. However, you requested about 9000 tokens (8000 of text input, 1000 in the output). Please reduce the length"
            ),
            (Some(8_000), Some(7_192))
        );
        assert_eq!(
            both(
                "Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in 280000 tokens. Please reduce the length of the messages."
            ),
            (Some(280_000), Some(272_000))
        );
        assert_eq!(
            both("This model's maximum context length is 8192 tokens."),
            (None, Some(8_192))
        );
    }

    #[test]
    fn vllm_wordings() {
        assert_eq!(
            both(
                "This model's maximum context length is 4096 tokens. However, you requested 500 output tokens and your prompt contains at least 3597 input tokens, for a total of at least 4097 tokens."
            ),
            (Some(3_597), Some(3_596))
        );
        assert_eq!(
            both(
                "You passed 5000 input tokens and requested 500 output tokens. However, the model's context length is only 4096 tokens, resulting in a maximum input length of 3596 tokens."
            ),
            (Some(5_000), Some(3_596))
        );
        assert_eq!(
            both("Input length (5000) exceeds model's maximum context length (4096)."),
            (Some(5_000), Some(4_096))
        );
    }

    #[test]
    fn local_server_wordings() {
        assert_eq!(
            both(
                r#"{"error":{"code":400,"message":"request (5000 tokens) exceeds the available context size (4096 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}"#
            ),
            (Some(5_000), Some(4_096))
        );
        assert_eq!(
            both(
                r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}"#
            ),
            (Some(5_000), Some(4_096))
        );
        assert_eq!(
            both(
                "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 4000 `inputs` tokens and 200 `max_new_tokens`"
            ),
            (Some(4_000), Some(3_896))
        );
        assert_eq!(
            both(
                "Trying to keep the first 9000 tokens when context the overflows. However, the model is loaded with context length of only 8192 tokens, which is not enough."
            ),
            (Some(9_000), Some(8_192))
        );
        assert_eq!(
            both("Current length is 9000 while limit is 8192"),
            (Some(9_000), Some(8_192))
        );
        assert_eq!(
            both("the request exceeds the available context size (5,000 tokens > 4,096 context)"),
            (Some(5_000), Some(4_096))
        );
        assert_eq!(both("prompt too long"), (None, None));
        assert_eq!(
            both("the prompt is longer than the context length currently available to the model"),
            (None, None)
        );
    }
}
