//! Which URLs a web tool may reach (pure): http and https only, no credentials in the URL, no
//! host inside the machine or its network (loopback, private, link-local, carrier-grade NAT,
//! cloud metadata) unless the user's config allows that host, and no value of a secret of the
//! server's anywhere in the URL or a search query. Addresses are judged here; the resolver in
//! `fetch.rs` judges every address a name resolves to before it is connected to.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

use super::WebError;

/// Secret values shorter than this are not looked for: they would match ordinary words.
pub const MIN_SECRET_CHARS: usize = 8;

/// Names that reach cloud metadata services or the machine itself whatever they resolve to.
const BLOCKED_NAMES: &[&str] = &[
    "localhost",
    "metadata",
    "metadata.google.internal",
    "metadata.goog",
    "instance-data",
    "instance-data.ec2.internal",
    "metadata.azure.com",
];

/// Name suffixes that never leave the machine or the cloud's private network.
const BLOCKED_SUFFIXES: &[&str] = &[".localhost", ".internal", ".local"];

/// The hosts the user's config lets a web tool reach even when they are internal
/// (`[web] allow_hosts`): exact names or addresses, or `*.example.com` for its subdomains.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList(Vec<String>);

impl AllowList {
    /// The list from the config's entries (case and surrounding brackets ignored).
    pub fn new(hosts: &[String]) -> AllowList {
        AllowList(
            hosts
                .iter()
                .map(|h| normalize(h))
                .filter(|h| !h.is_empty())
                .collect(),
        )
    }

    /// True when `host` (a name or an address as a URL spells it) is allowed.
    pub fn allows(&self, host: &str) -> bool {
        let host = normalize(host);
        self.0.iter().any(|a| match a.strip_prefix("*.") {
            Some(base) => host.ends_with(&format!(".{base}")),
            None => *a == host,
        })
    }
}

fn normalize(host: &str) -> String {
    host.trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

/// The secret values a URL or a query must not carry, each with the name it is known by
/// (the name is shown, never the value).
#[derive(Clone, Default)]
pub struct Secrets(Vec<(String, String)>);

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set()
            .entries(self.0.iter().map(|(n, _)| n))
            .finish()
    }
}

impl Secrets {
    /// The pairs (name, value) worth looking for: values shorter than [`MIN_SECRET_CHARS`]
    /// are dropped.
    pub fn new(pairs: impl IntoIterator<Item = (String, String)>) -> Secrets {
        Secrets(
            pairs
                .into_iter()
                .filter(|(_, v)| v.trim().chars().count() >= MIN_SECRET_CHARS)
                .map(|(n, v)| (n, v.trim().to_string()))
                .collect(),
        )
    }

    /// The name of a secret whose value `text` carries, as it is or percent-decoded (so
    /// `%41` cannot hide an `A`).
    pub fn carried_by(&self, text: &str) -> Option<&str> {
        let decoded = percent_decode(text);
        let plus = decoded.replace('+', " ");
        self.0
            .iter()
            .find(|(_, v)| text.contains(v) || decoded.contains(v) || plus.contains(v))
            .map(|(n, _)| n.as_str())
    }
}

/// `%XX` sequences decoded, repeatedly (a double-encoded value is found too), invalid UTF-8
/// replaced.
fn percent_decode(text: &str) -> String {
    let mut cur = text.to_string();
    for _ in 0..3 {
        let decoded = percent_encoding::percent_decode_str(&cur)
            .decode_utf8_lossy()
            .into_owned();
        if decoded == cur {
            break;
        }
        cur = decoded;
    }
    cur
}

/// Why an address is inside (the word goes into the refusal), or `None` for a public one.
pub fn internal_ip(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => internal_v4(v4),
        IpAddr::V6(v6) => internal_v6(v6),
    }
}

fn internal_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match () {
        _ if ip == Ipv4Addr::new(169, 254, 169, 254) => "a cloud metadata address",
        _ if ip == Ipv4Addr::new(100, 100, 100, 200) => "a cloud metadata address",
        _ if ip.is_loopback() => "a loopback address",
        _ if ip.is_unspecified() || a == 0 => "an unspecified address",
        _ if ip.is_private() => "a private address",
        _ if ip.is_link_local() => "a link-local address",
        _ if a == 100 && (64..128).contains(&b) => "a carrier-grade NAT address",
        _ if ip.is_multicast() => "a multicast address",
        _ if ip.is_broadcast() || a >= 240 => "a reserved address",
        _ if a == 192 && b == 0 && c == 0 => "an IETF protocol address",
        _ if a == 198 && (18..20).contains(&b) => "a benchmarking address",
        _ => return None,
    })
}

fn internal_v6(ip: Ipv6Addr) -> Option<&'static str> {
    // An IPv4 address inside an IPv6 one is judged as itself: `::ffff:127.0.0.1` is loopback.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return internal_v4(v4);
    }
    let s = ip.segments();
    // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) carry an IPv4 address a gateway connects to.
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        return internal_v4(Ipv4Addr::new(
            (s[6] >> 8) as u8,
            s[6] as u8,
            (s[7] >> 8) as u8,
            s[7] as u8,
        ));
    }
    if s[0] == 0x2002 {
        return internal_v4(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ));
    }
    Some(match () {
        _ if s == [0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254] => "a cloud metadata address",
        _ if ip.is_loopback() => "a loopback address",
        _ if ip.is_unspecified() => "an unspecified address",
        // ::/96, the old IPv4-compatible form.
        _ if s[..6] == [0, 0, 0, 0, 0, 0] => "a reserved address",
        _ if (s[0] & 0xfe00) == 0xfc00 => "a private (unique local) address",
        _ if (s[0] & 0xffc0) == 0xfe80 => "a link-local address",
        _ if (s[0] & 0xffc0) == 0xfec0 => "a site-local address",
        _ if ip.is_multicast() => "a multicast address",
        _ => return None,
    })
}

/// Why a host name is refused before it is resolved, or `None`.
pub fn internal_name(name: &str) -> Option<&'static str> {
    let n = normalize(name);
    if BLOCKED_NAMES.contains(&n.as_str()) || BLOCKED_SUFFIXES.iter().any(|s| n.ends_with(s)) {
        return Some("a name for the machine itself or a cloud's internal services");
    }
    None
}

/// Checks a URL before it is requested (the first one and every redirect): its scheme, its
/// credentials, its host (an address literal is judged here; a name again by the resolver),
/// and the secrets it may carry.
pub fn check_url(url: &Url, allow: &AllowList, secrets: &Secrets) -> Result<(), WebError> {
    if let Some(name) = secrets.carried_by(url.as_str()) {
        return Err(WebError::Secret(name.to_string()));
    }
    if !matches!(url.scheme(), "http" | "https") {
        return Err(WebError::Scheme(url.scheme().to_string()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(WebError::Credentials);
    }
    let refuse = |host: String, why: &'static str| Err(WebError::Internal { host, why });
    match url.host() {
        None => Err(WebError::NoHost),
        Some(Host::Domain(d)) if allow.allows(d) => Ok(()),
        Some(Host::Domain(d)) => match internal_name(d) {
            Some(why) => refuse(d.to_string(), why),
            None => Ok(()),
        },
        Some(Host::Ipv4(ip)) => match internal_ip(ip.into()) {
            Some(why) if !allow.allows(&ip.to_string()) => refuse(ip.to_string(), why),
            _ => Ok(()),
        },
        Some(Host::Ipv6(ip)) => match internal_ip(ip.into()) {
            Some(why) if !allow.allows(&ip.to_string()) => refuse(ip.to_string(), why),
            _ => Ok(()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(url: &str, allow: &[&str]) -> Result<(), WebError> {
        let allow = AllowList::new(&allow.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let secrets = Secrets::new([("MY_API_KEY".to_string(), "sk-live-0123456789".to_string())]);
        check_url(&Url::parse(url).unwrap(), &allow, &secrets)
    }

    #[test]
    fn internal_addresses_are_named() {
        let cases = [
            ("127.0.0.1", "loopback"),
            ("127.8.9.1", "loopback"),
            ("10.1.2.3", "private"),
            ("172.16.0.1", "private"),
            ("192.168.1.1", "private"),
            ("169.254.169.254", "metadata"),
            ("169.254.1.1", "link-local"),
            ("100.64.0.1", "carrier-grade"),
            ("100.100.100.200", "metadata"),
            ("0.0.0.0", "unspecified"),
            ("224.0.0.1", "multicast"),
            ("255.255.255.255", "reserved"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fd00:ec2::254", "metadata"),
            ("fd12:3456::1", "unique local"),
            ("fe80::1", "link-local"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:169.254.169.254", "metadata"),
            ("64:ff9b::a00:1", "private"),
            ("2002:7f00:1::", "loopback"),
            ("ff02::1", "multicast"),
        ];
        for (ip, want) in cases {
            let why = internal_ip(ip.parse().unwrap());
            assert!(why.is_some_and(|w| w.contains(want)), "{ip}: {why:?}");
        }
        for ip in ["93.184.215.14", "1.1.1.1", "2606:4700::1111", "100.128.0.1"] {
            assert_eq!(internal_ip(ip.parse().unwrap()), None, "{ip}");
        }
    }

    #[test]
    fn urls_are_checked_before_any_request() {
        assert!(check("https://docs.rs/serde", &[]).is_ok());
        assert!(matches!(
            check("http://127.0.0.1:8080/", &[]),
            Err(WebError::Internal { .. })
        ));
        assert!(matches!(
            check("http://[::1]/", &[]),
            Err(WebError::Internal { .. })
        ));
        // Decimal and hex forms parse to the same address.
        assert!(check("http://2130706433/", &[]).is_err());
        assert!(check("http://0x7f.1/", &[]).is_err());
        assert!(check("http://metadata.google.internal/", &[]).is_err());
        assert!(check("http://LOCALHOST./", &[]).is_err());
        assert!(check("http://app.localhost/", &[]).is_err());
        assert!(matches!(
            check("file:///etc/passwd", &[]),
            Err(WebError::Scheme(_))
        ));
        assert!(matches!(
            check("http://user:pw@example.com/", &[]),
            Err(WebError::Credentials)
        ));
        // The user's config lets a host through, and only that host.
        assert!(check("http://127.0.0.1:8080/", &["127.0.0.1"]).is_ok());
        assert!(check("http://localhost/", &["localhost"]).is_ok());
        assert!(check("http://127.0.0.2/", &["127.0.0.1"]).is_err());
        assert!(check("http://[::1]/", &["[::1]"]).is_ok());
        assert!(check("http://a.corp.example/", &["*.corp.example"]).is_ok());
        let wild = AllowList::new(&["*.corp.example".to_string()]);
        assert!(wild.allows("a.b.corp.example") && !wild.allows("corp.example.evil"));
    }

    #[test]
    fn secrets_are_found_however_the_url_spells_them() {
        let secret = |u: &str| matches!(check(u, &["127.0.0.1"]), Err(WebError::Secret(n)) if n == "MY_API_KEY");
        assert!(secret("https://example.com/?k=sk-live-0123456789"));
        assert!(secret("https://example.com/sk-live-0123456789/x"));
        assert!(secret("https://example.com/?k=sk%2Dlive%2D0123456789"));
        assert!(secret("https://example.com/?k=sk%252Dlive-0123456789"));
        assert!(secret("http://127.0.0.1/#sk-live-0123456789"));
        assert!(!secret("https://example.com/?k=sk-live-012345678"));
        // Short values would match ordinary words.
        let s = Secrets::new([("PIN".to_string(), "1234".to_string())]);
        assert_eq!(s.carried_by("https://example.com/1234"), None);
    }
}
