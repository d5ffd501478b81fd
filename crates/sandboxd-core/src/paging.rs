//! Long text cut into pages a model can read one at a time: byte offsets into the UTF-8
//! text, with every page boundary moved back onto a character boundary so no page ever
//! holds half a character.

/// What an MCP tool returns inline of each long stream before it holds the rest.
pub const INLINE_PAGE_BYTES: usize = 16 * 1024;
/// Page size when the caller gives none.
pub const DEFAULT_PAGE_BYTES: usize = 64 * 1024;
pub const MIN_PAGE_BYTES: usize = 1024;
pub const MAX_PAGE_BYTES: usize = 256 * 1024;

/// One page of a text: the bytes `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page<'a> {
    pub start: usize,
    pub end: usize,
    pub text: &'a str,
}

impl Page<'_> {
    /// Whether nothing follows this page.
    pub fn is_last(&self, total: usize) -> bool {
        self.end >= total
    }
}

/// The page of `text` that starts at `offset` (moved back to a character boundary, or
/// to the end when past it) and holds at most `limit` bytes. A page is never empty
/// unless it starts at the end of the text.
pub fn page(text: &str, offset: usize, limit: usize) -> Page<'_> {
    let start = text.floor_char_boundary(offset.min(text.len()));
    let mut end = text.floor_char_boundary(start.saturating_add(limit).min(text.len()));
    if end == start && start < text.len() {
        // A limit narrower than one character still makes progress.
        end = text.ceil_char_boundary(start + 1);
    }
    Page {
        start,
        end,
        text: &text[start..end],
    }
}

/// Clamps a requested page size into the allowed range.
pub fn page_limit(requested: Option<u64>) -> usize {
    requested.map_or(DEFAULT_PAGE_BYTES, |limit| {
        usize::try_from(limit)
            .unwrap_or(MAX_PAGE_BYTES)
            .clamp(MIN_PAGE_BYTES, MAX_PAGE_BYTES)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_cover_the_text_exactly_once() {
        let text = "é".repeat(1000) + "tail";
        let mut offset = 0;
        let mut joined = String::new();
        loop {
            let page = page(&text, offset, 333);
            joined.push_str(page.text);
            assert!(page.text.len() <= 333);
            offset = page.end;
            if page.is_last(text.len()) {
                break;
            }
        }
        assert_eq!(joined, text);
    }

    #[test]
    fn an_offset_inside_a_character_moves_back_to_its_start() {
        let text = "aé";
        let page = page(text, 2, 10);
        assert_eq!((page.start, page.text), (1, "é"));
    }

    #[test]
    fn past_the_end_is_an_empty_last_page() {
        let page = page("abc", 99, 10);
        assert_eq!((page.start, page.end, page.text), (3, 3, ""));
        assert!(page.is_last(3));
    }

    #[test]
    fn a_limit_narrower_than_a_character_still_progresses() {
        let page = page("€x", 0, 1);
        assert_eq!(page.text, "€");
    }

    #[test]
    fn limits_are_clamped() {
        assert_eq!(page_limit(None), DEFAULT_PAGE_BYTES);
        assert_eq!(page_limit(Some(1)), MIN_PAGE_BYTES);
        assert_eq!(page_limit(Some(u64::MAX)), MAX_PAGE_BYTES);
    }
}
