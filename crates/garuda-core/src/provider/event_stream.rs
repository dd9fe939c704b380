//! A bounded Server-Sent Events parser: bytes in any chunking, events out.
//!
//! Pure and incremental like the transport's frame decoder: its output does not depend on how
//! the input is chunked, and it never holds more than [`MAX_LINE_BYTES`] of one line and
//! [`MAX_EVENT_BYTES`] of one event's data, whatever the server sends; a whole stream may
//! carry at most [`MAX_STREAM_BYTES`]. Past a cap it reports [`SseError`] and the caller
//! stops reading (a server that sends a 300 MiB body without a newline costs 4 MiB).
//!
//! Follows the WHATWG rules: lines end in LF, CRLF or CR; a blank line dispatches the event;
//! `data:` lines are joined with LF; `event:` names it (default `message`); comments (`:`),
//! `id:` and `retry:` are ignored; one leading space of a value is dropped; a leading BOM is
//! skipped; an event not closed by a blank line when the stream ends is dropped. Invalid
//! UTF-8 is replaced.

/// Longest line kept (a longer one is an error).
pub const MAX_LINE_BYTES: usize = 4 << 20;
/// Most data bytes of one event.
pub const MAX_EVENT_BYTES: usize = 4 << 20;
/// Most bytes of one response stream.
pub const MAX_STREAM_BYTES: u64 = 64 << 20;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` name, `message` when absent.
    pub event: String,
    /// The `data:` lines joined with LF.
    pub data: String,
}

/// A cap was exceeded; the stream must be abandoned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// One line is longer than [`MAX_LINE_BYTES`].
    #[error("the event stream has a line longer than {0} bytes")]
    LineTooLong(usize),
    /// One event's data is larger than [`MAX_EVENT_BYTES`].
    #[error("the event stream has an event larger than {0} bytes")]
    EventTooLarge(usize),
    /// The stream is longer than [`MAX_STREAM_BYTES`].
    #[error("the event stream is longer than {0} bytes")]
    StreamTooLarge(u64),
}

/// The incremental parser.
#[derive(Debug)]
pub struct SseParser {
    line: Vec<u8>,
    data: String,
    has_data: bool,
    event: String,
    /// The previous byte was a CR, so a LF right after it ends nothing.
    after_cr: bool,
    started: bool,
    total: u64,
    max_line: usize,
    max_event: usize,
    max_total: u64,
    failed: Option<SseError>,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::with_limits(MAX_LINE_BYTES, MAX_EVENT_BYTES, MAX_STREAM_BYTES)
    }
}

impl SseParser {
    /// A parser with other caps (tests).
    pub fn with_limits(max_line: usize, max_event: usize, max_total: u64) -> Self {
        SseParser {
            line: Vec::new(),
            data: String::new(),
            has_data: false,
            event: String::new(),
            after_cr: false,
            started: false,
            total: 0,
            max_line,
            max_event,
            max_total,
            failed: None,
        }
    }

    /// Bytes held for the unfinished line and event (for the memory bound's tests).
    pub fn buffered(&self) -> usize {
        self.line.len() + self.data.len() + self.event.len()
    }

    /// Consumes `chunk`, appending the events it completes to `out`. After an error every
    /// later call returns the same error.
    pub fn push(&mut self, mut chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        self.total = self.total.saturating_add(chunk.len() as u64);
        if self.total > self.max_total {
            return self.fail(SseError::StreamTooLarge(self.max_total));
        }
        if !self.started {
            // A BOM may be split across chunks: wait for three bytes or a shorter stream.
            let mut head = std::mem::take(&mut self.line);
            head.extend_from_slice(chunk);
            if head.len() < 3 && b"\xEF\xBB\xBF".starts_with(&head) {
                self.line = head;
                return Ok(());
            }
            self.started = true;
            let rest = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&head).to_vec();
            return self.push_bytes(&rest, out);
        }
        while !chunk.is_empty() {
            let n = chunk.len().min(64 * 1024);
            self.push_bytes(&chunk[..n], out)?;
            chunk = &chunk[n..];
        }
        Ok(())
    }

    fn fail(&mut self, e: SseError) -> Result<(), SseError> {
        self.line = Vec::new();
        self.data = String::new();
        self.failed = Some(e.clone());
        Err(e)
    }

    fn push_bytes(&mut self, mut bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        while !bytes.is_empty() {
            if self.after_cr {
                self.after_cr = false;
                if bytes[0] == b'\n' {
                    bytes = &bytes[1..];
                    continue;
                }
            }
            match bytes.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(i) => {
                    if self.line.len() + i > self.max_line {
                        return self.fail(SseError::LineTooLong(self.max_line));
                    }
                    self.line.extend_from_slice(&bytes[..i]);
                    self.after_cr = bytes[i] == b'\r';
                    bytes = &bytes[i + 1..];
                    let line = std::mem::take(&mut self.line);
                    self.line_done(&line, out)?;
                }
                None => {
                    if self.line.len() + bytes.len() > self.max_line {
                        return self.fail(SseError::LineTooLong(self.max_line));
                    }
                    self.line.extend_from_slice(bytes);
                    bytes = &[];
                }
            }
        }
        Ok(())
    }

    fn line_done(&mut self, line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if line.is_empty() {
            if self.has_data {
                let mut data = std::mem::take(&mut self.data);
                if data.ends_with('\n') {
                    data.pop();
                }
                let event = std::mem::take(&mut self.event);
                out.push(SseEvent {
                    event: if event.is_empty() {
                        "message".to_string()
                    } else {
                        event
                    },
                    data,
                });
            }
            self.has_data = false;
            self.data.clear();
            self.event.clear();
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &[][..]),
        };
        match field {
            b"data" => {
                if self.data.len() + value.len() + 1 > self.max_event {
                    return self.fail(SseError::EventTooLarge(self.max_event));
                }
                self.data.push_str(&String::from_utf8_lossy(value));
                self.data.push('\n');
                self.has_data = true;
            }
            b"event" => {
                self.event = String::from_utf8_lossy(value).into_owned();
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse_chunks(p: &mut SseParser, chunks: &[&[u8]]) -> (Vec<SseEvent>, Option<SseError>) {
        let mut out = Vec::new();
        for c in chunks {
            if let Err(e) = p.push(c, &mut out) {
                return (out, Some(e));
            }
        }
        (out, None)
    }

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
        }
    }

    #[test]
    fn line_endings_fields_and_dispatch() {
        let input = b"\xEF\xBB\xBF: comment\r\nevent: a\r\ndata: x\r\ndata:y\r\n\r\ndata: z\rid: 3\r\r\nevent: lost\n";
        let (evs, err) = parse_chunks(&mut SseParser::default(), &[input]);
        assert_eq!(err, None);
        assert_eq!(evs, vec![ev("a", "x\ny"), ev("message", "z")]);
        // An event without data is not dispatched; its name does not leak into the next.
        let (evs, _) = parse_chunks(&mut SseParser::default(), &[b"event: ping\n\ndata: {}\n\n"]);
        assert_eq!(evs, vec![ev("message", "{}")]);
    }

    #[test]
    fn caps_stop_the_stream_with_bounded_memory() {
        let mut p = SseParser::with_limits(16, 32, 1 << 20);
        let long = vec![b'x'; 1000];
        let (_, err) = parse_chunks(&mut p, &[b"data: ", &long]);
        assert_eq!(err, Some(SseError::LineTooLong(16)));
        assert!(p.buffered() <= 16);
        // Later pushes keep failing.
        assert_eq!(
            p.push(b"\n\n", &mut Vec::new()),
            Err(SseError::LineTooLong(16))
        );

        let mut p = SseParser::with_limits(16, 32, 1 << 20);
        let (_, err) = parse_chunks(&mut p, &[b"data: 0123456789\n".repeat(4).as_slice()]);
        assert_eq!(err, Some(SseError::EventTooLarge(32)));

        let mut p = SseParser::with_limits(16, 32, 100);
        let (evs, err) = parse_chunks(&mut p, &[b"data: 1\n\n".repeat(20).as_slice()]);
        assert!(evs.is_empty());
        assert_eq!(err, Some(SseError::StreamTooLarge(100)));
    }

    fn chunked(data: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
        points.sort_unstable();
        let mut out = Vec::new();
        let mut last = 0;
        for p in points {
            out.push(data[last..p].to_vec());
            last = p;
        }
        out.push(data[last..].to_vec());
        out
    }

    fn sse_bytes() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            Just(b"data: ".to_vec()),
            Just(b"event: ".to_vec()),
            Just(b"\n".to_vec()),
            Just(b"\r".to_vec()),
            Just(b"\r\n".to_vec()),
            Just(b":".to_vec()),
            Just(b"\xEF\xBB\xBF".to_vec()),
            Just(b"{\"type\":\"ping\"}".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..8),
        ];
        proptest::collection::vec(piece, 0..60).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(crate::fuzz::config(256))]

        /// Fuzz target: the SSE parser on arbitrary bytes in arbitrary chunks never panics,
        /// gives the same events however the bytes are cut, and holds at most its caps.
        #[test]
        fn fuzz_sse_parser(data in sse_bytes(), cuts in proptest::collection::vec(any::<usize>(), 0..8), max_line in 1usize..64) {
            let mut whole = SseParser::with_limits(max_line, 64, 1 << 20);
            let (a, ea) = parse_chunks(&mut whole, &[&data]);
            let mut parts = SseParser::with_limits(max_line, 64, 1 << 20);
            let chunks = chunked(&data, &cuts);
            let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
            let (b, eb) = parse_chunks(&mut parts, &refs);
            prop_assert_eq!(ea.is_some(), eb.is_some());
            if ea.is_none() {
                prop_assert_eq!(a, b);
            }
            prop_assert!(parts.buffered() <= max_line + 64 + max_line);
        }
    }
}
