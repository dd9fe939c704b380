//! Asking a local model server for its context window before the first request: the window a
//! server was started with (llama.cpp's `-c`, Ollama's `num_ctx`) is often far smaller than
//! the model's, and nothing else says so until a request overflows. Each server has its own
//! endpoint; the answers are parsed by pure functions and cached per server and model, a
//! failed probe too (the server is not asked again in this process).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

/// The window a server reported, and which endpoint said so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerWindow {
    /// Tokens.
    pub tokens: u64,
    /// `llama.cpp /props`, `ollama /api/show`, `lmstudio /api/v0/models`, `vllm /v1/models`.
    pub source: &'static str,
}

/// How long one probe waits: a local server answers at once or not at all.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// llama.cpp's `GET /props`: `default_generation_settings.n_ctx` (or a top-level `n_ctx`).
pub fn llamacpp_props(body: &Value) -> Option<u64> {
    body["default_generation_settings"]["n_ctx"]
        .as_u64()
        .or_else(|| body["n_ctx"].as_u64())
        .filter(|&n| n > 0)
}

/// Ollama's `POST /api/show`: `num_ctx` from the model's parameters when set (what the server
/// loads it with), else `model_info.<arch>.context_length`.
pub fn ollama_show(body: &Value) -> Option<u64> {
    let from_params = body["parameters"].as_str().and_then(|p| {
        p.lines().find_map(|l| {
            let mut it = l.split_whitespace();
            (it.next() == Some("num_ctx"))
                .then(|| it.next()?.parse::<u64>().ok())
                .flatten()
        })
    });
    let from_info = body["model_info"].as_object().and_then(|info| {
        info.iter()
            .find(|(k, _)| k.ends_with(".context_length"))
            .and_then(|(_, v)| v.as_u64())
    });
    from_params.or(from_info).filter(|&n| n > 0)
}

/// The entry for `model` in an OpenAI-style `{"data": [{"id": …}]}` list (the only entry when
/// the server lists one model under another name).
fn entry<'a>(body: &'a Value, model: &str) -> Option<&'a Value> {
    let data = body["data"].as_array()?;
    data.iter()
        .find(|m| m["id"].as_str() == Some(model))
        .or_else(|| (data.len() == 1).then(|| &data[0]))
}

/// LM Studio's `GET /api/v0/models`: the loaded context length, else the model's maximum.
pub fn lmstudio_models(body: &Value, model: &str) -> Option<u64> {
    let m = entry(body, model)?;
    m["loaded_context_length"]
        .as_u64()
        .or_else(|| m["max_context_length"].as_u64())
        .filter(|&n| n > 0)
}

/// vLLM's `GET /v1/models`: `max_model_len`.
pub fn vllm_models(body: &Value, model: &str) -> Option<u64> {
    entry(body, model)?["max_model_len"]
        .as_u64()
        .filter(|&n| n > 0)
}

/// True for a server on this machine (loopback or unspecified address, `localhost`).
pub fn is_local(base_url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(base_url) else {
        return false;
    };
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback() || ip.is_unspecified(),
        Err(_) => host == "localhost" || host.ends_with(".localhost"),
    }
}

/// The server's root: the base URL without its `/v1`.
fn root(base_url: &str) -> &str {
    base_url
        .trim_end_matches('/')
        .strip_suffix("/v1")
        .unwrap_or(base_url)
}

/// Probes already made: (base URL, model) → what they found.
type Probes = HashMap<(String, String), Option<ServerWindow>>;
static CACHE: LazyLock<Mutex<Probes>> = LazyLock::new(Mutex::default);

/// Asks the server at `base_url` (an OpenAI-compatible `…/v1`) for `model`'s window, trying
/// the endpoint of the server `provider` names first, then the others; cached.
pub async fn ask(
    client: &reqwest::Client,
    provider: &str,
    base_url: &str,
    model: &str,
) -> Option<ServerWindow> {
    let key = (base_url.to_string(), model.to_string());
    if let Some(hit) = CACHE.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return *hit;
    }
    let found = probe(client, provider, base_url, model).await;
    CACHE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, found);
    found
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Llamacpp,
    Ollama,
    Lmstudio,
    Vllm,
}

async fn probe(
    client: &reqwest::Client,
    provider: &str,
    base_url: &str,
    model: &str,
) -> Option<ServerWindow> {
    let mut order = vec![Kind::Llamacpp, Kind::Ollama, Kind::Lmstudio, Kind::Vllm];
    let first = match provider {
        "ollama" => Some(Kind::Ollama),
        "lmstudio" => Some(Kind::Lmstudio),
        "vllm" => Some(Kind::Vllm),
        "llamacpp" => Some(Kind::Llamacpp),
        _ => None,
    };
    if let Some(f) = first {
        order.retain(|k| *k != f);
        order.insert(0, f);
    }
    let root = root(base_url);
    for kind in order {
        let got = match kind {
            Kind::Llamacpp => get(client, &format!("{root}/props"))
                .await
                .and_then(|b| llamacpp_props(&b))
                .map(|t| (t, "llama.cpp /props")),
            Kind::Ollama => post(client, &format!("{root}/api/show"), json!({"model": model}))
                .await
                .and_then(|b| ollama_show(&b))
                .map(|t| (t, "ollama /api/show")),
            Kind::Lmstudio => get(client, &format!("{root}/api/v0/models"))
                .await
                .and_then(|b| lmstudio_models(&b, model))
                .map(|t| (t, "lmstudio /api/v0/models")),
            Kind::Vllm => get(client, &format!("{root}/v1/models"))
                .await
                .and_then(|b| vllm_models(&b, model))
                .map(|t| (t, "vllm /v1/models")),
        };
        if let Some((tokens, source)) = got {
            return Some(ServerWindow { tokens, source });
        }
    }
    None
}

async fn get(client: &reqwest::Client, url: &str) -> Option<Value> {
    let resp = client.get(url).timeout(PROBE_TIMEOUT).send().await.ok()?;
    if !resp.status().is_success() {
        return None;
    }
    resp.json::<Value>().await.ok()
}

async fn post(client: &reqwest::Client, url: &str, body: Value) -> Option<Value> {
    let resp = client
        .post(url)
        .timeout(PROBE_TIMEOUT)
        .json(&body)
        .send()
        .await
        .ok()?;
    if !resp.status().is_success() {
        return None;
    }
    resp.json::<Value>().await.ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_server_s_answer() {
        let props = json!({"default_generation_settings": {"n_ctx": 4096, "params": {}},
                           "total_slots": 1, "model_path": "/m/gemma.gguf"});
        assert_eq!(llamacpp_props(&props), Some(4_096));
        assert_eq!(llamacpp_props(&json!({"n_ctx": 2048})), Some(2_048));
        assert_eq!(llamacpp_props(&json!({})), None);
        let show = json!({"parameters": "stop \"<end>\"\nnum_ctx                        8192",
                          "model_info": {"gemma3.context_length": 32768}});
        assert_eq!(ollama_show(&show), Some(8_192));
        let show = json!({"model_info": {"general.architecture": "llama",
                                         "llama.context_length": 131072}});
        assert_eq!(ollama_show(&show), Some(131_072));
        let lm = json!({"data": [{"id": "other", "max_context_length": 1},
                                 {"id": "qwen", "max_context_length": 32768,
                                  "loaded_context_length": 4096}]});
        assert_eq!(lmstudio_models(&lm, "qwen"), Some(4_096));
        assert_eq!(lmstudio_models(&lm, "absent"), None);
        let vllm =
            json!({"object": "list", "data": [{"id": "Qwen/Qwen3", "max_model_len": 16384}]});
        assert_eq!(vllm_models(&vllm, "Qwen/Qwen3"), Some(16_384));
        // A single served model under another name is still the one.
        assert_eq!(vllm_models(&vllm, "qwen3"), Some(16_384));
    }

    #[test]
    fn only_local_servers_are_asked() {
        assert!(is_local("http://127.0.0.1:8080/v1"));
        assert!(is_local("http://localhost:11434/v1"));
        assert!(is_local("http://[::1]:8000/v1"));
        assert!(!is_local("https://api.openai.com/v1"));
        assert!(!is_local("not a url"));
        assert_eq!(root("http://127.0.0.1:8080/v1"), "http://127.0.0.1:8080");
        assert_eq!(root("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
    }
}
