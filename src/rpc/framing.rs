//! Framing: LSP base protocol (`Content-Length:` headers) and newline-delimited JSON on one
//! byte stream, detected from its first non-whitespace byte.
//!
//! [`Decoder`] is a pure, incremental state machine: it is fed any chunks of bytes and yields
//! [`FrameEvent`]s; its output does not depend on how the input is chunked. It never holds
//! more than `max_frame_bytes` of a frame (plus a small header buffer): an oversize frame is
//! discarded while it streams past, keeping only a [`PREFIX_BYTES`] prefix for its id.

use std::collections::VecDeque;

use tokio::io::{AsyncRead, AsyncReadExt};

/// How messages are delimited on the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// LSP base protocol: `Content-Length: N\r\n` (other headers allowed), `\r\n`, N bytes.
    ContentLength,
    /// One JSON message per line.
    Newline,
}

/// Bytes of a skipped frame kept to read its id from.
pub const PREFIX_BYTES: usize = 4096;
/// Largest header block accepted before it is treated as garbage.
pub const MAX_HEADER_BYTES: usize = 8192;

/// Frames `body` for the wire.
pub fn encode(framing: Framing, body: &[u8]) -> Vec<u8> {
    match framing {
        Framing::ContentLength => {
            let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
            out.extend_from_slice(body);
            out
        }
        Framing::Newline => {
            let mut out = Vec::with_capacity(body.len() + 1);
            out.extend_from_slice(body);
            out.push(b'\n');
            out
        }
    }
}

/// Header bytes to write before `body` (empty for newline framing).
pub fn header(framing: Framing, body_len: usize) -> Vec<u8> {
    match framing {
        Framing::ContentLength => format!("Content-Length: {body_len}\r\n\r\n").into_bytes(),
        Framing::Newline => Vec::new(),
    }
}

/// Bytes to write after `body`.
pub fn trailer(framing: Framing) -> &'static [u8] {
    match framing {
        Framing::ContentLength => b"",
        Framing::Newline => b"\n",
    }
}

/// What the decoder found on the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameEvent {
    /// A complete frame body.
    Frame(Vec<u8>),
    /// A frame larger than the maximum was skipped.
    Oversize {
        /// The declared `Content-Length`, or `None` for a newline frame.
        declared: Option<u64>,
        /// The first bytes of the body (at most [`PREFIX_BYTES`]).
        prefix: Vec<u8>,
    },
    /// A header block could not be used; bytes were skipped up to the next `Content-Length:`.
    BadHeader {
        /// What was wrong.
        reason: String,
        /// The first bytes skipped after the header (at most [`PREFIX_BYTES`]).
        prefix: Vec<u8>,
    },
    /// The stream ended inside a frame.
    Truncated {
        /// Bytes of the unfinished frame that had arrived.
        received: usize,
    },
}

const RESYNC: &[u8] = b"content-length:";

#[derive(Debug)]
enum State {
    Detect,
    /// Collecting a header block; `buf` is empty while skipping whitespace between messages.
    Headers {
        buf: Vec<u8>,
    },
    Body {
        buf: Vec<u8>,
        need: usize,
    },
    /// Discarding an oversize body; `prefix` is `None` once the frame has been reported.
    Skip {
        remaining: u64,
        declared: u64,
        prefix: Option<Vec<u8>>,
    },
    /// Looking for the next `Content-Length:` after a bad header; `matched` bytes of it seen.
    Resync {
        reason: String,
        prefix: Vec<u8>,
        matched: usize,
    },
    Line {
        buf: Vec<u8>,
    },
    /// Discarding an oversize line; `prefix` is `None` once the line has been reported.
    SkipLine {
        prefix: Option<Vec<u8>>,
    },
}

/// Incremental, sans-IO frame decoder for both framings.
#[derive(Debug)]
pub struct Decoder {
    max: usize,
    framing: Option<Framing>,
    state: State,
}

fn push_prefix(prefix: &mut Vec<u8>, data: &[u8]) {
    let room = PREFIX_BYTES.saturating_sub(prefix.len());
    prefix.extend_from_slice(&data[..room.min(data.len())]);
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

impl Decoder {
    /// A decoder refusing frames larger than `max_frame_bytes`.
    pub fn new(max_frame_bytes: usize) -> Self {
        Self {
            max: max_frame_bytes,
            framing: None,
            state: State::Detect,
        }
    }

    /// The framing detected so far.
    pub fn framing(&self) -> Option<Framing> {
        self.framing
    }

    /// Consumes all of `data`, appending what it completes to `out`.
    pub fn push(&mut self, mut data: &[u8], out: &mut Vec<FrameEvent>) {
        while !data.is_empty() {
            let used = self.step(data, out);
            data = &data[used..];
        }
    }

    /// Ends the stream: reports an unfinished frame or skipped bytes.
    pub fn finish(&mut self, out: &mut Vec<FrameEvent>) {
        match std::mem::replace(&mut self.state, State::Detect) {
            State::Detect => {}
            State::Headers { buf } => {
                if !buf.is_empty() {
                    out.push(FrameEvent::Truncated {
                        received: buf.len(),
                    });
                }
            }
            State::Line { buf } => {
                // A last line without its newline still counts (`printf '{...}' | garuda`).
                self.state = State::Line { buf };
                self.push(b"\n", out);
                self.state = State::Detect;
            }
            State::Body { buf, .. } => out.push(FrameEvent::Truncated {
                received: buf.len(),
            }),
            State::Skip {
                remaining,
                declared,
                prefix,
            } => out.push(match prefix {
                Some(prefix) => FrameEvent::Oversize {
                    declared: Some(declared),
                    prefix,
                },
                None => FrameEvent::Truncated {
                    received: (declared - remaining) as usize,
                },
            }),
            State::Resync { reason, prefix, .. } => {
                out.push(FrameEvent::BadHeader { reason, prefix })
            }
            State::SkipLine { prefix } => {
                if let Some(prefix) = prefix {
                    out.push(FrameEvent::Oversize {
                        declared: None,
                        prefix,
                    });
                }
            }
        }
    }

    /// Handles a prefix of `data` and returns how many bytes it used (at least one).
    fn step(&mut self, data: &[u8], out: &mut Vec<FrameEvent>) -> usize {
        match &mut self.state {
            State::Detect => {
                let Some(pos) = data.iter().position(|&b| !is_ws(b)) else {
                    return data.len();
                };
                // A header name starts with a letter; anything else is taken as JSON lines,
                // so a garbage first line gets a parse error rather than a header error.
                let framing = if data[pos].is_ascii_alphabetic() {
                    self.state = State::Headers { buf: Vec::new() };
                    Framing::ContentLength
                } else {
                    self.state = State::Line { buf: Vec::new() };
                    Framing::Newline
                };
                self.framing = Some(framing);
                // May be zero: the state changed, so the next step makes progress.
                pos
            }
            State::Headers { buf } => {
                let mut i = 0;
                while i < data.len() {
                    let b = data[i];
                    i += 1;
                    if buf.is_empty() && is_ws(b) {
                        continue;
                    }
                    buf.push(b);
                    if buf.ends_with(b"\r\n\r\n") || buf.ends_with(b"\n\n") {
                        let block = std::mem::take(buf);
                        self.end_headers(&block, out);
                        return i;
                    }
                    if buf.len() > MAX_HEADER_BYTES {
                        self.state = State::Resync {
                            reason: "header block too large".into(),
                            prefix: Vec::new(),
                            matched: 0,
                        };
                        return i;
                    }
                }
                i
            }
            State::Body { buf, need } => {
                let take = (*need - buf.len()).min(data.len());
                buf.extend_from_slice(&data[..take]);
                if buf.len() == *need {
                    out.push(FrameEvent::Frame(std::mem::take(buf)));
                    self.state = State::Headers { buf: Vec::new() };
                }
                take
            }
            State::Skip {
                remaining,
                declared,
                prefix,
            } => {
                let take = (*remaining).min(data.len() as u64) as usize;
                if let Some(p) = prefix {
                    push_prefix(p, &data[..take]);
                    // Reported as soon as the prefix is complete, so the client hears about
                    // it without waiting for the whole body to stream past.
                    if p.len() as u64 == (PREFIX_BYTES as u64).min(*declared) {
                        out.push(FrameEvent::Oversize {
                            declared: Some(*declared),
                            prefix: std::mem::take(p),
                        });
                        *prefix = None;
                    }
                }
                *remaining -= take as u64;
                if *remaining == 0 {
                    self.state = State::Headers { buf: Vec::new() };
                }
                take
            }
            State::Resync {
                reason,
                prefix,
                matched,
            } => {
                for (i, &b) in data.iter().enumerate() {
                    if prefix.len() < PREFIX_BYTES {
                        prefix.push(b);
                    }
                    let b = b.to_ascii_lowercase();
                    // The pattern has no border, so on a mismatch only its first byte can
                    // start a new match.
                    if b == RESYNC[*matched] {
                        *matched += 1;
                    } else {
                        *matched = usize::from(b == RESYNC[0]);
                    }
                    if *matched == RESYNC.len() {
                        // Drop the header we just found from the skipped bytes.
                        let keep = prefix.len().saturating_sub(RESYNC.len());
                        let mut prefix = std::mem::take(prefix);
                        if prefix[keep..].eq_ignore_ascii_case(RESYNC) {
                            prefix.truncate(keep);
                        }
                        out.push(FrameEvent::BadHeader {
                            reason: std::mem::take(reason),
                            prefix,
                        });
                        self.state = State::Headers {
                            buf: b"Content-Length:".to_vec(),
                        };
                        return i + 1;
                    }
                }
                data.len()
            }
            State::Line { buf } => match data.iter().position(|&b| b == b'\n') {
                Some(pos) => {
                    buf.extend_from_slice(&data[..pos]);
                    let mut line = std::mem::take(buf);
                    if line.len() > self.max.saturating_add(1)
                        || (line.len() > self.max && line.last() != Some(&b'\r'))
                    {
                        line.truncate(PREFIX_BYTES);
                        out.push(FrameEvent::Oversize {
                            declared: None,
                            prefix: line,
                        });
                    } else {
                        if line.last() == Some(&b'\r') {
                            line.pop();
                        }
                        if line.iter().any(|&b| !is_ws(b)) {
                            out.push(FrameEvent::Frame(line));
                        }
                    }
                    pos + 1
                }
                None => {
                    buf.extend_from_slice(data);
                    // One byte of slack for a `\r` before the newline.
                    if buf.len() > self.max.saturating_add(1) {
                        let mut prefix = std::mem::take(buf);
                        prefix.truncate(PREFIX_BYTES);
                        let prefix = if prefix.len() == PREFIX_BYTES {
                            out.push(FrameEvent::Oversize {
                                declared: None,
                                prefix,
                            });
                            None
                        } else {
                            Some(prefix)
                        };
                        self.state = State::SkipLine { prefix };
                    }
                    data.len()
                }
            },
            State::SkipLine { prefix } => {
                let end = data.iter().position(|&b| b == b'\n');
                let body = &data[..end.unwrap_or(data.len())];
                if let Some(p) = prefix {
                    push_prefix(p, body);
                    if p.len() == PREFIX_BYTES || end.is_some() {
                        out.push(FrameEvent::Oversize {
                            declared: None,
                            prefix: std::mem::take(p),
                        });
                        *prefix = None;
                    }
                }
                match end {
                    Some(pos) => {
                        self.state = State::Line { buf: Vec::new() };
                        pos + 1
                    }
                    None => data.len(),
                }
            }
        }
    }

    fn end_headers(&mut self, block: &[u8], out: &mut Vec<FrameEvent>) {
        match parse_headers(block) {
            Ok(n) if n > self.max as u64 => {
                self.state = State::Skip {
                    remaining: n,
                    declared: n,
                    prefix: Some(Vec::new()),
                };
            }
            Ok(0) => {
                out.push(FrameEvent::Frame(Vec::new()));
                self.state = State::Headers { buf: Vec::new() };
            }
            Ok(n) => {
                let need = n as usize;
                self.state = State::Body {
                    buf: Vec::with_capacity(need.min(1 << 20)),
                    need,
                };
            }
            Err(reason) => {
                self.state = State::Resync {
                    reason,
                    prefix: Vec::new(),
                    matched: 0,
                };
            }
        }
    }
}

/// Reads `Content-Length` from a header block (names case-insensitive, other headers ignored).
fn parse_headers(block: &[u8]) -> Result<u64, String> {
    let text = std::str::from_utf8(block).map_err(|_| "header is not UTF-8".to_owned())?;
    let mut length = None;
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(format!("malformed header line {:?}", clip(line)));
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            let value = value.trim();
            if value.starts_with('-') {
                return Err(format!("negative Content-Length {:?}", clip(value)));
            }
            if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("non-numeric Content-Length {:?}", clip(value)));
            }
            let n = value
                .parse::<u64>()
                .map_err(|_| format!("absurd Content-Length {:?}", clip(value)))?;
            length = Some(n);
        }
    }
    length.ok_or_else(|| "missing Content-Length header".to_owned())
}

fn clip(s: &str) -> String {
    s.chars().take(64).collect()
}

/// Reads [`FrameEvent`]s from an async byte stream.
pub struct FrameReader<R> {
    input: R,
    decoder: Decoder,
    ready: VecDeque<FrameEvent>,
    scratch: Vec<FrameEvent>,
    buf: Box<[u8]>,
    done: bool,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// A reader refusing frames larger than `max_frame_bytes`.
    pub fn new(input: R, max_frame_bytes: usize) -> Self {
        Self {
            input,
            decoder: Decoder::new(max_frame_bytes),
            ready: VecDeque::new(),
            scratch: Vec::new(),
            buf: vec![0; 64 * 1024].into_boxed_slice(),
            done: false,
        }
    }

    /// The framing detected so far.
    pub fn framing(&self) -> Option<Framing> {
        self.decoder.framing()
    }

    /// The next event, or `None` at end of input (a read error counts as end of input).
    pub async fn next(&mut self) -> Option<FrameEvent> {
        loop {
            if let Some(ev) = self.ready.pop_front() {
                return Some(ev);
            }
            if self.done {
                return None;
            }
            match self.input.read(&mut self.buf).await {
                Ok(0) => {
                    self.done = true;
                    self.decoder.finish(&mut self.scratch);
                }
                Ok(n) => self.decoder.push(&self.buf[..n], &mut self.scratch),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::warn!("reading input failed, treating as end of input: {e}");
                    self.done = true;
                    self.decoder.finish(&mut self.scratch);
                }
            }
            self.ready.extend(self.scratch.drain(..));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode(max: usize, chunks: &[&[u8]]) -> (Vec<FrameEvent>, Option<Framing>) {
        let mut d = Decoder::new(max);
        let mut out = Vec::new();
        for c in chunks {
            d.push(c, &mut out);
        }
        d.finish(&mut out);
        (out, d.framing())
    }

    fn frames(evs: &[FrameEvent]) -> Vec<&[u8]> {
        evs.iter()
            .filter_map(|e| match e {
                FrameEvent::Frame(f) => Some(f.as_slice()),
                _ => None,
            })
            .collect()
    }

    fn one_by_one(data: &[u8]) -> Vec<&[u8]> {
        data.chunks(1).collect()
    }

    const A: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"a"}"#;
    const B: &[u8] = br#"{"jsonrpc":"2.0","method":"b","params":{"s":"x\ny"}}"#;

    #[test]
    fn round_trip_both_framings() {
        for framing in [Framing::ContentLength, Framing::Newline] {
            let mut wire = encode(framing, A);
            wire.extend(encode(framing, B));
            let mut split = header(framing, A.len());
            split.extend_from_slice(A);
            split.extend_from_slice(trailer(framing));
            assert_eq!(split, encode(framing, A));
            for chunks in [vec![wire.as_slice()], one_by_one(&wire)] {
                let (evs, f) = decode(1 << 20, &chunks);
                assert_eq!(f, Some(framing));
                assert_eq!(
                    evs,
                    vec![FrameEvent::Frame(A.into()), FrameEvent::Frame(B.into())]
                );
            }
        }
    }

    #[test]
    fn detection() {
        assert_eq!(decode(100, &[b"\r\n  {}\n"]).1, Some(Framing::Newline));
        assert_eq!(decode(100, &[b"\n[1]\n"]).1, Some(Framing::Newline));
        assert_eq!(
            decode(100, &[b"\n\nContent-Length: 2\r\n\r\n{}"]).1,
            Some(Framing::ContentLength)
        );
        assert_eq!(
            decode(100, &[b"content-type: x\r\n"]).1,
            Some(Framing::ContentLength)
        );
        assert_eq!(decode(100, &[b"   "]).1, None);
        assert_eq!(
            decode(100, &[b"  ", b" ", b"{}"]).0,
            vec![FrameEvent::Frame(b"{}".to_vec())]
        );
    }

    #[test]
    fn headers_case_insensitive_with_content_type_and_whitespace_between() {
        let wire = b"content-type: application/vscode-jsonrpc; charset=utf-8\r\nCONTENT-LENGTH:  2 \r\n\r\n{}\r\n\r\nContent-Length: 3\n\n[1]";
        for chunks in [vec![&wire[..]], one_by_one(wire)] {
            let (evs, _) = decode(100, &chunks);
            assert_eq!(frames(&evs), vec![&b"{}"[..], b"[1]"]);
        }
    }

    #[test]
    fn newline_blank_lines_and_crlf() {
        let wire = b"{\"a\":1}\r\n\r\n   \n{\"b\":2}\n";
        let (evs, _) = decode(100, &[wire]);
        assert_eq!(frames(&evs), vec![&br#"{"a":1}"#[..], br#"{"b":2}"#]);
    }

    #[test]
    fn oversize_content_length_is_skipped_keeping_prefix() {
        let big = format!(
            r#"{{"jsonrpc":"2.0","id":9,"method":"x","params":"{}"}}"#,
            "y".repeat(10_000)
        );
        let mut wire = encode(Framing::ContentLength, big.as_bytes());
        wire.extend(encode(Framing::ContentLength, A));
        for chunks in [vec![wire.as_slice()], wire.chunks(7).collect()] {
            let (evs, _) = decode(64, &chunks);
            match &evs[0] {
                FrameEvent::Oversize { declared, prefix } => {
                    assert_eq!(*declared, Some(big.len() as u64));
                    assert_eq!(prefix.len(), PREFIX_BYTES);
                    assert_eq!(prefix[..], big.as_bytes()[..PREFIX_BYTES]);
                }
                e => panic!("{e:?}"),
            }
            assert_eq!(evs[1..], [FrameEvent::Frame(A.into())]);
        }
    }

    #[test]
    fn oversize_line_is_skipped_keeping_prefix() {
        let big = format!(r#"{{"id":"q","p":"{}"}}"#, "z".repeat(5000));
        let wire = format!("{big}\r\n{}\n", std::str::from_utf8(A).unwrap());
        for chunks in [vec![wire.as_bytes()], one_by_one(wire.as_bytes())] {
            let (evs, _) = decode(64, &chunks);
            match &evs[0] {
                FrameEvent::Oversize {
                    declared: None,
                    prefix,
                } => {
                    assert_eq!(prefix[..], big.as_bytes()[..PREFIX_BYTES]);
                }
                e => panic!("{e:?}"),
            }
            assert_eq!(evs[1..], [FrameEvent::Frame(A.into())]);
        }
        // A line just at the limit passes, with or without `\r`.
        let line = "1".repeat(64);
        let (evs, _) = decode(64, &[format!("{line}\n{line}\r\n").as_bytes()]);
        assert_eq!(evs.len(), 2);
        assert!(
            evs.iter()
                .all(|e| matches!(e, FrameEvent::Frame(f) if f.len() == 64))
        );
        let (evs, _) = decode(64, &[format!("{{{line}\n").as_bytes()]);
        assert!(matches!(evs[0], FrameEvent::Oversize { .. }));
    }

    #[test]
    fn oversize_is_reported_once_its_prefix_is_complete() {
        let body = br#"{"jsonrpc":"2.0","id":3,"method":"m","params":["#;
        let mut d = Decoder::new(100);
        let mut out = Vec::new();
        d.push(b"Content-Length: 1000000000000\r\n\r\n", &mut out);
        d.push(body, &mut out);
        assert!(out.is_empty(), "prefix not complete yet");
        d.push(&[b' '; PREFIX_BYTES], &mut out);
        assert!(
            matches!(&out[..], [FrameEvent::Oversize { declared: Some(1_000_000_000_000), prefix }]
            if prefix.starts_with(body) && prefix.len() == PREFIX_BYTES)
        );
        d.finish(&mut out);
        assert!(matches!(out[1], FrameEvent::Truncated { .. }));
        // The same for a line: no need to wait for its newline.
        let mut d = Decoder::new(100);
        let mut out = Vec::new();
        d.push(body, &mut out);
        d.push(&[b' '; PREFIX_BYTES], &mut out);
        assert!(matches!(
            &out[..],
            [FrameEvent::Oversize { declared: None, .. }]
        ));
        d.push(b"]}\n[]\n", &mut out);
        assert_eq!(out[1..], [FrameEvent::Frame(b"[]".to_vec())]);
    }

    #[test]
    fn bad_headers_resync_to_next_message() {
        for (head, why) in [
            ("Content-Type: x\r\n\r\n", "missing"),
            ("Content-Length: -5\r\n\r\n", "negative"),
            ("Content-Length: abc\r\n\r\n", "non-numeric"),
            ("Content-Length: 99999999999999999999999\r\n\r\n", "absurd"),
            ("Garbage line\r\n\r\n", "malformed"),
        ] {
            let mut wire = head.as_bytes().to_vec();
            wire.extend_from_slice(br#"{"jsonrpc":"2.0","id":5,"method":"m"}"#);
            wire.extend(encode(Framing::ContentLength, A));
            for chunks in [vec![wire.as_slice()], one_by_one(&wire)] {
                let (evs, _) = decode(1000, &chunks);
                match &evs[0] {
                    FrameEvent::BadHeader { reason, prefix } => {
                        assert!(reason.contains(why), "{reason}");
                        assert_eq!(prefix, br#"{"jsonrpc":"2.0","id":5,"method":"m"}"#);
                    }
                    e => panic!("{e:?}"),
                }
                assert_eq!(evs[1..], [FrameEvent::Frame(A.into())], "{why}");
            }
        }
    }

    #[test]
    fn huge_header_block_is_refused() {
        let mut wire = b"X-Junk: ".to_vec();
        wire.extend(std::iter::repeat_n(b'j', 3 * MAX_HEADER_BYTES));
        wire.extend(encode(Framing::ContentLength, A));
        let (evs, _) = decode(1000, &[&wire]);
        assert!(
            matches!(&evs[0], FrameEvent::BadHeader { reason, .. } if reason.contains("too large"))
        );
        assert_eq!(evs[1..], [FrameEvent::Frame(A.into())]);
    }

    #[test]
    fn truncated_input_is_reported() {
        let (evs, _) = decode(1000, &[b"Content-Length: 10\r\n\r\n{\"a\""]);
        assert_eq!(evs, vec![FrameEvent::Truncated { received: 4 }]);
        let (evs, _) = decode(1000, &[b"Content-Length: 10\r\n"]);
        assert_eq!(evs, vec![FrameEvent::Truncated { received: 20 }]);
        // A last JSON line without its newline is still a frame.
        let (evs, _) = decode(1000, &[b"{\"a\":1}\n{\"b\":2}"]);
        assert_eq!(frames(&evs), vec![&br#"{"a":1}"#[..], br#"{"b":2}"#]);
        let (evs, _) = decode(1000, &[b"{\"a\":1}\n\n  "]);
        assert_eq!(evs.len(), 1);
    }

    #[test]
    fn zero_length_body_is_an_empty_frame() {
        let (evs, _) = decode(1000, &[b"Content-Length: 0\r\n\r\n"]);
        assert_eq!(evs, vec![FrameEvent::Frame(Vec::new())]);
    }

    #[tokio::test]
    async fn frame_reader_over_one_byte_reads() {
        struct OneByte(Vec<u8>, usize);
        impl AsyncRead for OneByte {
            fn poll_read(
                mut self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                if self.1 < self.0.len() {
                    let b = self.0[self.1];
                    buf.put_slice(&[b]);
                    self.1 += 1;
                }
                std::task::Poll::Ready(Ok(()))
            }
        }
        let mut wire = encode(Framing::ContentLength, A);
        wire.extend(encode(Framing::ContentLength, B));
        let mut r = FrameReader::new(OneByte(wire, 0), 1000);
        assert_eq!(r.next().await, Some(FrameEvent::Frame(A.into())));
        assert_eq!(r.framing(), Some(Framing::ContentLength));
        assert_eq!(r.next().await, Some(FrameEvent::Frame(B.into())));
        assert_eq!(r.next().await, None);
        assert_eq!(r.next().await, None);
    }

    fn chunked(data: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut rest = data;
        for &c in cuts {
            if rest.is_empty() {
                break;
            }
            let (a, b) = rest.split_at(c.min(rest.len()));
            out.push(a.to_vec());
            rest = b;
        }
        out.push(rest.to_vec());
        out
    }

    fn interesting_bytes() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..40),
            Just(b"Content-Length: ".to_vec()),
            Just(b"\r\n\r\n".to_vec()),
            Just(b"\n".to_vec()),
            (0u32..200).prop_map(|n| n.to_string().into_bytes()),
            Just(A.to_vec()),
        ];
        proptest::collection::vec(piece, 0..20).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(crate::fuzz::config(256))]

        /// Fuzz target: both framings, any bytes in any chunking: no panic, the same events
        /// however the input is cut, and no frame above the cap.
        #[test]
        fn fuzz_framing_any_chunking(
            data in interesting_bytes(),
            cuts in proptest::collection::vec(1usize..50, 0..30),
            max in 0usize..120,
        ) {
            let whole = decode(max, &[&data]);
            let parts = chunked(&data, &cuts);
            let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
            let pieces = decode(max, &refs);
            prop_assert_eq!(&whole, &pieces);
            let bytes = one_by_one(&data);
            prop_assert_eq!(&whole, &decode(max, &bytes));
            for ev in &whole.0 {
                if let FrameEvent::Frame(f) = ev {
                    prop_assert!(f.len() <= max);
                }
            }
        }

        /// Fuzz target: random bytes never panic the decoder.
        #[test]
        fn fuzz_framing_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..2000), max in 0usize..300) {
            let _ = decode(max, &[&data]);
        }
    }
}
