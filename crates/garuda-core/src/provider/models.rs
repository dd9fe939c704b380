//! The model table: context window and output limit per known model.

use std::collections::BTreeMap;

use serde::Serialize;

use super::ModelOverride;

/// Limits of one model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    /// Context window in tokens.
    pub context_window: u64,
    /// Largest output in tokens.
    pub max_output: u32,
    /// False when the model is not in the table nor the config (the caller should warn).
    pub known: bool,
    /// What its tokens cost, when the config names prices (the table has none: prices change
    /// more often than releases, and a stale price misleads).
    pub prices: Option<Prices>,
    /// Where `context_window` comes from: `config`, `table`, `default` or `environment`.
    #[serde(skip)]
    pub window_from: &'static str,
}

/// Prices in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Prices {
    /// Uncached input.
    pub input: f64,
    /// Output.
    pub output: f64,
    /// Input written to the prompt cache.
    pub cache_write: f64,
    /// Input read from the prompt cache.
    pub cache_read: f64,
}

impl Prices {
    /// The dollars of one response's usage.
    pub fn cost(&self, u: &crate::message::Usage) -> f64 {
        (u.input_tokens as f64 * self.input
            + u.output_tokens as f64 * self.output
            + u.cache_creation_input_tokens as f64 * self.cache_write
            + u.cache_read_input_tokens as f64 * self.cache_read)
            / 1_000_000.0
    }
}

/// Window assumed for an unknown model.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;
/// Output limit assumed for an unknown model.
pub const DEFAULT_MAX_OUTPUT: u32 = 8_192;

/// Known models by id prefix: (id, context window, max output).
const TABLE: &[(&str, u64, u32)] = &[
    ("claude-opus-4-5", 200_000, 64_000),
    ("claude-sonnet-4-5", 200_000, 64_000),
    ("claude-haiku-4-5", 200_000, 64_000),
    ("claude-opus-4-1", 200_000, 32_000),
    ("claude-opus-4", 200_000, 32_000),
    ("claude-sonnet-4", 200_000, 64_000),
    ("claude-3-7-sonnet", 200_000, 64_000),
    ("claude-3-5-sonnet", 200_000, 8_192),
    ("claude-3-5-haiku", 200_000, 8_192),
    ("gpt-5.1", 400_000, 128_000),
    ("gpt-5", 400_000, 128_000),
    ("gpt-5-mini", 400_000, 128_000),
    ("gpt-5-nano", 400_000, 128_000),
    ("gpt-4.1", 1_047_576, 32_768),
    ("gpt-4.1-mini", 1_047_576, 32_768),
    ("gpt-4.1-nano", 1_047_576, 32_768),
    ("gpt-4o", 128_000, 16_384),
    ("gpt-4o-mini", 128_000, 16_384),
    ("o3", 200_000, 100_000),
    ("o3-mini", 200_000, 100_000),
    ("o4-mini", 200_000, 100_000),
    ("qwen3-coder", 262_144, 65_536),
    ("qwen2.5-coder", 32_768, 8_192),
    ("gpt-oss", 131_072, 32_768),
    ("deepseek-coder-v2", 163_840, 8_192),
    ("devstral", 131_072, 32_768),
    ("llama3.1", 131_072, 8_192),
    ("llama3.3", 131_072, 8_192),
];

/// The known name closest to `given`, when it is close enough to be a misspelling (at most a
/// third of its characters differ); for "did you mean" in errors and warnings.
pub fn closest<'a>(given: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let given = given.to_ascii_lowercase();
    let limit = (given.chars().count() / 3).max(1);
    known
        .into_iter()
        .map(|k| (strsim::levenshtein(&given, &k.to_ascii_lowercase()), k))
        .filter(|(d, _)| *d > 0 && *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// The table's model ids.
pub fn table_ids() -> impl Iterator<Item = &'static str> {
    TABLE.iter().map(|(id, _, _)| *id)
}

/// The table's models as specs a session may switch to, in table order: Claude models on
/// `anthropic`, GPT and o-series on `openai`, open models on `ollama`.
pub fn builtin_specs() -> Vec<String> {
    TABLE
        .iter()
        .map(|(id, _, _)| {
            let provider = if id.starts_with("claude") {
                "anthropic"
            } else if id.starts_with("gpt-5") || id.starts_with("gpt-4") || id.starts_with('o') {
                "openai"
            } else {
                "ollama"
            };
            format!("{provider}/{id}")
        })
        .collect()
}

/// Looks a model up: config overrides (by full spec, then model id) over the table, where the
/// longest id that is the model id or a prefix of it followed by `-`, `:` or `@` wins (so
/// dated ids and Ollama tags match). `Qwen/Qwen3-Coder` style ids match on their last segment.
pub fn lookup(spec: &str, model: &str, overrides: &BTreeMap<String, ModelOverride>) -> ModelInfo {
    let base = table_lookup(model);
    let ov = overrides.get(spec).or_else(|| overrides.get(model));
    let prices = ov.and_then(ModelOverride::prices);
    let info = match (base, ov) {
        (Some((cw, mo)), Some(o)) => ModelInfo {
            context_window: o.context_window.unwrap_or(cw),
            max_output: o.max_output.unwrap_or(mo),
            known: true,
            prices: None,
            window_from: if o.context_window.is_some() {
                "config"
            } else {
                "table"
            },
        },
        (Some((cw, mo)), None) => ModelInfo {
            context_window: cw,
            max_output: mo,
            known: true,
            prices: None,
            window_from: "table",
        },
        (None, Some(o)) => ModelInfo {
            context_window: o.context_window.unwrap_or(DEFAULT_CONTEXT_WINDOW),
            max_output: o.max_output.unwrap_or(DEFAULT_MAX_OUTPUT),
            known: o.context_window.is_some(),
            prices: None,
            window_from: if o.context_window.is_some() {
                "config"
            } else {
                "default"
            },
        },
        (None, None) => ModelInfo {
            context_window: DEFAULT_CONTEXT_WINDOW,
            max_output: DEFAULT_MAX_OUTPUT,
            known: false,
            prices: None,
            window_from: "default",
        },
    };
    ModelInfo { prices, ..info }
}

fn table_lookup(model: &str) -> Option<(u64, u32)> {
    let lower = model.to_ascii_lowercase();
    let id = lower.rsplit('/').next().unwrap_or(&lower);
    TABLE
        .iter()
        .filter(|(name, _, _)| {
            id == *name
                || id
                    .strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with(['-', ':', '@']))
        })
        .max_by_key(|(name, _, _)| name.len())
        .map(|&(_, cw, mo)| (cw, mo))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_models_and_prefixes() {
        let none = BTreeMap::new();
        let i = lookup(
            "anthropic/claude-sonnet-4-5-20250929",
            "claude-sonnet-4-5-20250929",
            &none,
        );
        assert_eq!(
            (i.context_window, i.max_output, i.known),
            (200_000, 64_000, true)
        );
        let i = lookup("anthropic/claude-opus-4-1", "claude-opus-4-1", &none);
        assert_eq!(i.max_output, 32_000);
        let i = lookup("ollama/qwen3-coder:30b", "qwen3-coder:30b", &none);
        assert_eq!(i.context_window, 262_144);
        let i = lookup("openai/gpt-5-mini", "gpt-5-mini", &none);
        assert!(i.known);
        let i = lookup("vllm/Qwen/qwen3-coder", "Qwen/qwen3-coder", &none);
        assert!(i.known);
    }

    #[test]
    fn unknown_models_get_defaults() {
        let i = lookup("ollama/mystery", "mystery", &BTreeMap::new());
        assert_eq!(
            i,
            ModelInfo {
                context_window: 128_000,
                max_output: 8_192,
                known: false,
                prices: None,
                window_from: "default",
            }
        );
        // "gpt-50" is not "gpt-5" followed by a separator.
        assert!(!lookup("openai/gpt-50", "gpt-50", &BTreeMap::new()).known);
    }

    #[test]
    fn overrides_win() {
        let mut ov = BTreeMap::new();
        ov.insert(
            "mystery".to_string(),
            ModelOverride {
                context_window: Some(32_000),
                ..Default::default()
            },
        );
        ov.insert(
            "anthropic/claude-sonnet-4-5".to_string(),
            ModelOverride {
                max_output: Some(1000),
                input_price: Some(3.0),
                output_price: Some(15.0),
                ..Default::default()
            },
        );
        let i = lookup("ollama/mystery", "mystery", &ov);
        assert_eq!(
            (i.context_window, i.max_output, i.known),
            (32_000, 8_192, true)
        );
        let i = lookup("anthropic/claude-sonnet-4-5", "claude-sonnet-4-5", &ov);
        assert_eq!((i.context_window, i.max_output), (200_000, 1000));
        // Prices only when the config names them; cache prices follow the input price.
        assert_eq!(lookup("ollama/mystery", "mystery", &ov).prices, None);
        let p = i.prices.unwrap();
        assert!((p.cache_write - 3.75).abs() < 1e-9 && (p.cache_read - 0.3).abs() < 1e-9);
        let u = crate::message::Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 2_000_000,
            cleared_input_tokens: 0,
        };
        assert!((p.cost(&u) - (3.0 + 1.5 + 0.6)).abs() < 1e-9);
    }
}
