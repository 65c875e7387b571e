//! Replies that page: a service answering with a list takes items while their JSON fits under
//! a byte budget well below the bus' payload limit, and says where the next page starts, so
//! no list is ever too long to send (`hermes.sessions.list`, `.show`, `hermes.memory.list`).

use serde::Serialize;

use super::DEFAULT_MAX_PAYLOAD;

/// The smallest budget a page gets, whatever the configuration says.
const MIN_PAGE_BYTES: usize = 16 * 1024;

/// The bytes one page's items may take: half of the envelope limit (and of the NATS default
/// payload), leaving room for the envelope and the rest of the reply.
pub fn page_budget(max_envelope_bytes: usize) -> usize {
    (max_envelope_bytes.min(DEFAULT_MAX_PAYLOAD) / 2).max(MIN_PAGE_BYTES)
}

/// Items from `items` while their JSON fits in `budget` bytes — at least one, at most `limit`
/// (0: no count limit) — and whether any item was left out.
pub fn fit<T: Serialize>(
    items: impl IntoIterator<Item = T>,
    limit: usize,
    budget: usize,
) -> (Vec<T>, bool) {
    let limit = if limit == 0 { usize::MAX } else { limit };
    let mut page = Vec::new();
    let mut used = 0usize;
    for item in items {
        let size = json_len(&item);
        if page.len() >= limit || (!page.is_empty() && used.saturating_add(size) > budget) {
            return (page, true);
        }
        used = used.saturating_add(size);
        page.push(item);
    }
    (page, false)
}

/// Bytes of `value` as JSON, counted without building the text.
pub fn json_len<T: Serialize>(value: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // A value that cannot be encoded counts as nothing here; encoding the reply reports it.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_stops_at_its_limit_or_its_budget_and_always_holds_one_item() {
        let items: Vec<String> = (0..10).map(|i| format!("item-{i}")).collect();
        let (page, more) = fit(items.clone(), 3, 1_000);
        assert_eq!((page.len(), more), (3, true));
        let (page, more) = fit(items.clone(), 0, 1_000);
        assert_eq!((page.len(), more), (10, false));
        // Each item is 8 bytes of JSON (quotes included): two fit in 20.
        let (page, more) = fit(items.clone(), 0, 20);
        assert_eq!((page.len(), more), (2, true));
        let (page, more) = fit(vec!["x".repeat(100)], 0, 10);
        assert_eq!(
            (page.len(), more),
            (1, false),
            "an item larger than the budget goes alone"
        );
    }

    #[test]
    fn the_budget_stays_under_the_payload_limit() {
        assert_eq!(page_budget(256 * 1024), 128 * 1024);
        assert_eq!(page_budget(64 * 1024 * 1024), DEFAULT_MAX_PAYLOAD / 2);
        assert_eq!(page_budget(100), MIN_PAGE_BYTES);
    }
}
