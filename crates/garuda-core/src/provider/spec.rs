//! Model spec parsing: `provider/model` or `replay:PATH`.

use std::path::PathBuf;

use super::ProviderError;

/// A parsed model spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSpec {
    /// A provider reached over HTTP.
    Remote {
        /// Provider name (a key of the providers table or a built-in).
        provider: String,
        /// Provider-side model id; may itself contain `/` (e.g. `Qwen/Qwen3-Coder`).
        model: String,
    },
    /// A replay cassette.
    Replay(PathBuf),
}

impl ModelSpec {
    /// Parses `anthropic/claude-sonnet-4-5`, `ollama/qwen3-coder:30b`, `replay:PATH`; a bare
    /// `claude-*`, `gpt-*` or `o3`/`o4` name is given its obvious provider.
    pub fn parse(spec: &str) -> Result<ModelSpec, ProviderError> {
        let spec = spec.trim();
        if let Some(path) = spec.strip_prefix("replay:") {
            if path.is_empty() {
                return Err(ProviderError::Config(
                    "`replay:` needs a cassette path, e.g. `replay:tests/cassette.jsonl`".into(),
                ));
            }
            return Ok(ModelSpec::Replay(PathBuf::from(path)));
        }
        if let Some((provider, model)) = spec.split_once('/') {
            if provider.is_empty() || model.is_empty() {
                return Err(bad(spec));
            }
            return Ok(ModelSpec::Remote {
                provider: provider.to_string(),
                model: model.to_string(),
            });
        }
        let inferred = if spec.starts_with("claude-") {
            "anthropic"
        } else if spec.starts_with("gpt-")
            || ["o1", "o3", "o4"]
                .iter()
                .any(|p| spec == *p || spec.starts_with(&format!("{p}-")))
        {
            "openai"
        } else {
            return Err(bad(spec));
        };
        Ok(ModelSpec::Remote {
            provider: inferred.to_string(),
            model: spec.to_string(),
        })
    }

    /// The provider-side model id for [`super::ModelRequest::model`] (`replay` for a cassette).
    pub fn model_id(&self) -> &str {
        match self {
            ModelSpec::Remote { model, .. } => model,
            ModelSpec::Replay(_) => "replay",
        }
    }

    /// The provider name (`replay` for a cassette).
    pub fn provider(&self) -> &str {
        match self {
            ModelSpec::Remote { provider, .. } => provider,
            ModelSpec::Replay(_) => "replay",
        }
    }
}

fn bad(spec: &str) -> ProviderError {
    ProviderError::Config(format!(
        "model spec `{spec}` is not `provider/model` (e.g. `anthropic/claude-sonnet-4-5`, \
         `openai/gpt-5.1`, `ollama/qwen3-coder`) or `replay:PATH`"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(p: &str, m: &str) -> ModelSpec {
        ModelSpec::Remote {
            provider: p.into(),
            model: m.into(),
        }
    }

    #[test]
    fn parses_specs() {
        assert_eq!(
            ModelSpec::parse("anthropic/claude-sonnet-4-5").unwrap(),
            remote("anthropic", "claude-sonnet-4-5")
        );
        assert_eq!(
            ModelSpec::parse("vllm/Qwen/Qwen3-Coder").unwrap(),
            remote("vllm", "Qwen/Qwen3-Coder")
        );
        assert_eq!(
            ModelSpec::parse("ollama/qwen3-coder:30b").unwrap(),
            remote("ollama", "qwen3-coder:30b")
        );
        assert_eq!(
            ModelSpec::parse("replay:a/b.jsonl").unwrap(),
            ModelSpec::Replay("a/b.jsonl".into())
        );
        assert_eq!(
            ModelSpec::parse("claude-opus-4-5").unwrap(),
            remote("anthropic", "claude-opus-4-5")
        );
        assert_eq!(
            ModelSpec::parse("gpt-5.1").unwrap(),
            remote("openai", "gpt-5.1")
        );
        assert_eq!(ModelSpec::parse("o3").unwrap(), remote("openai", "o3"));
        let s = ModelSpec::parse("ollama/qwen3-coder").unwrap();
        assert_eq!((s.provider(), s.model_id()), ("ollama", "qwen3-coder"));
    }

    #[test]
    fn rejects_bad_specs() {
        for s in ["", "qwen", "/x", "x/", "replay:"] {
            assert!(
                matches!(ModelSpec::parse(s), Err(ProviderError::Config(_))),
                "{s}"
            );
        }
    }
}
