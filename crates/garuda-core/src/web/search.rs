//! `web_search`'s backend: a SearXNG instance's JSON API (`GET /search?q=…&format=json`),
//! asked through the same guarded GET as a fetch; its results become a bounded list of title,
//! URL and snippet.

use serde::Deserialize;
use tokio_util::sync::CancellationToken;
use url::Url;

use super::{Web, WebError};

/// Longest title shown, in characters.
const TITLE_CHARS: usize = 200;
/// Longest snippet shown, in characters.
const SNIPPET_CHARS: usize = 500;
/// Longest URL shown, in characters.
const URL_CHARS: usize = 500;

/// One search result.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Hit {
    /// The page's title.
    #[serde(default)]
    pub title: String,
    /// Its URL.
    #[serde(default)]
    pub url: String,
    /// What the engine quotes of it.
    #[serde(default)]
    pub content: String,
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    results: Vec<Hit>,
}

/// The SearXNG URL that searches `query` at `base`.
pub fn searxng_url(base: &str, query: &str) -> Result<Url, WebError> {
    let mut url =
        Url::parse(base.trim()).map_err(|e| WebError::BadUrl(base.to_string(), e.to_string()))?;
    let path = format!("{}/search", url.path().trim_end_matches('/'));
    url.set_path(&path);
    url.query_pairs_mut()
        .clear()
        .append_pair("q", query)
        .append_pair("format", "json");
    Ok(url)
}

/// The results of a SearXNG answer, at most `max`.
pub fn parse_searxng(body: &[u8], max: usize) -> Result<Vec<Hit>, WebError> {
    let answer: Answer =
        serde_json::from_slice(body).map_err(|e| WebError::Backend(e.to_string()))?;
    Ok(answer.results.into_iter().take(max).collect())
}

/// The list the model reads (pure): numbered, each field cut and on one line.
pub fn render(hits: &[Hit]) -> String {
    if hits.is_empty() {
        return "No results.".to_string();
    }
    let line = |s: &str, max: usize| {
        let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
        match s.char_indices().nth(max) {
            Some((i, _)) => format!("{}…", &s[..i]),
            None => s,
        }
    };
    hits.iter()
        .enumerate()
        .map(|(i, h)| {
            let mut item = format!(
                "{}. {}\n   {}",
                i + 1,
                line(&h.title, TITLE_CHARS),
                line(&h.url, URL_CHARS)
            );
            let snippet = line(&h.content, SNIPPET_CHARS);
            if !snippet.is_empty() {
                item.push_str(&format!("\n   {snippet}"));
            }
            item
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl Web {
    /// True when a search backend is configured.
    pub fn can_search(&self) -> bool {
        self.settings.search.searxng_url.is_some()
    }

    /// Searches `query` at the configured backend: the URL asked and the results.
    pub async fn search(
        &self,
        query: &str,
        cancel: &CancellationToken,
    ) -> Result<(Url, Vec<Hit>), WebError> {
        if let Some(name) = self.secrets().carried_by(query) {
            return Err(WebError::Secret(name.to_string()));
        }
        let Some(base) = self.settings.search.searxng_url.as_deref() else {
            return Err(WebError::Backend("no search backend is configured".into()));
        };
        let url = searxng_url(base, query)?;
        let got = self.get(url.as_str(), "application/json", cancel).await?;
        if !(200..300).contains(&got.status) {
            return Err(WebError::Backend(format!("HTTP {}", got.status)));
        }
        let hits = parse_searxng(&got.body, self.settings.search.max_results)?;
        Ok((url, hits))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn searxng_answers_become_a_bounded_list() {
        let url = searxng_url("http://127.0.0.1:8888/searx/", "rust & serde").unwrap();
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:8888/searx/search?q=rust+%26+serde&format=json"
        );
        let body = br#"{"query":"x","results":[
            {"title":"Serde","url":"https://serde.rs/","content":"A framework\nfor serializing","engine":"ddg"},
            {"title":"Two","url":"https://two.example/"},
            {"title":"Three","url":"https://three.example/","content":"c"}]}"#;
        let hits = parse_searxng(body, 2).unwrap();
        assert_eq!(hits.len(), 2);
        assert_eq!(
            render(&hits),
            "1. Serde\n   https://serde.rs/\n   A framework for serializing\n2. Two\n   https://two.example/"
        );
        assert_eq!(render(&[]), "No results.");
        assert!(matches!(
            parse_searxng(b"<html>", 5),
            Err(WebError::Backend(_))
        ));
    }
}
