//! A Server-Sent-Events parser that survives arbitrary chunk boundaries (mid-line, mid-UTF-8
//! character): every streaming wire format (Chat Completions, Responses, Anthropic Messages)
//! reads its events through it.

use crate::llm::LlmError;

/// Splits a byte stream into SSE events and yields each event's `data` payload.
///
/// Follows the SSE rules that matter here: lines end in `\n` or `\r\n`; `data:` lines of one
/// event are joined with `\n`; a blank line ends the event; `:` comments and other fields
/// (`event:`, `id:`, `retry:`) are ignored.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    pending: Vec<u8>,
    data: Option<String>,
}

impl SseParser {
    /// Feed the next chunk of bytes; returns the data of every event it completed.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Result<Vec<String>, LlmError> {
        self.pending.extend_from_slice(chunk);
        let mut events = Vec::new();
        let mut start = 0;
        while let Some(offset) = self.pending[start..].iter().position(|&b| b == b'\n') {
            let end = start + offset;
            let line = strip_cr(&self.pending[start..end]);
            let line = std::str::from_utf8(line)
                .map_err(|_| LlmError::BadResponse("the event stream is not valid UTF-8".into()))?;
            if let Some(data) = Self::line(&mut self.data, line) {
                events.push(data);
            }
            start = end + 1;
        }
        self.pending.drain(..start);
        Ok(events)
    }

    /// The stream ended: the data of an event left unterminated, if any.
    pub(crate) fn finish(&mut self) -> Result<Option<String>, LlmError> {
        let rest = std::mem::take(&mut self.pending);
        let line = std::str::from_utf8(strip_cr(&rest))
            .map_err(|_| LlmError::BadResponse("the event stream is not valid UTF-8".into()))?;
        if let Some(data) = Self::line(&mut self.data, line) {
            return Ok(Some(data));
        }
        Ok(self.data.take())
    }

    /// Handle one line; returns an event's data when the line ends the event.
    fn line(data: &mut Option<String>, line: &str) -> Option<String> {
        if line.is_empty() {
            return data.take();
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        if field == "data" {
            let value = value.strip_prefix(' ').unwrap_or(value);
            match data {
                Some(existing) => {
                    existing.push('\n');
                    existing.push_str(value);
                }
                None => *data = Some(value.to_string()),
            }
        }
        None
    }
}

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn events_of(stream: &[u8], chunk_size: usize) -> Vec<String> {
        let mut parser = SseParser::default();
        let mut events = Vec::new();
        for chunk in stream.chunks(chunk_size) {
            events.extend(parser.push(chunk).unwrap());
        }
        events.extend(parser.finish().unwrap());
        events
    }

    #[test]
    fn sse_events_survive_every_chunk_boundary_including_mid_utf8() {
        let stream = "data: {\"a\":\"预算\"}\n\n: keep-alive\n\nevent: x\r\ndata:{\"b\":2}\r\n\r\ndata: [DONE]\n\n";
        let expected = vec![
            "{\"a\":\"预算\"}".to_string(),
            "{\"b\":2}".to_string(),
            "[DONE]".to_string(),
        ];
        for size in 1..=stream.len() {
            assert_eq!(
                events_of(stream.as_bytes(), size),
                expected,
                "chunk size {size}"
            );
        }
    }

    #[test]
    fn sse_multi_line_data_is_joined_and_unterminated_event_is_flushed_at_end() {
        let events = events_of(b"data: one\ndata: two\n\ndata: tail", 4);
        assert_eq!(events, vec!["one\ntwo".to_string(), "tail".to_string()]);
    }

    #[test]
    fn sse_invalid_utf8_is_a_bad_response() {
        let mut parser = SseParser::default();
        let err = parser.push(b"data: \xff\xfe\n\n").unwrap_err();
        assert!(matches!(err, LlmError::BadResponse(_)));
    }
}
