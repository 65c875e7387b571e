//! Text for the terminal: styles that vanish when output is plain ([`Look`]), Markdown lines
//! rendered with pulldown-cmark ([`Markdown`]), and an answer streamed as it arrives
//! ([`AnswerStream`]: the line being written shows raw, and is redrawn rendered once complete).

use console::Style;
use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use unicode_width::UnicodeWidthStr;

/// Whether output is styled (a terminal without `NO_COLOR`) or plain text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Look {
    pub styled: bool,
}

impl Look {
    pub fn paint(&self, style: Style, text: &str) -> String {
        if self.styled {
            style.force_styling(true).apply_to(text).to_string()
        } else {
            text.to_string()
        }
    }
    pub fn dim(&self, text: &str) -> String {
        self.paint(Style::new().dim(), text)
    }
    pub fn bold(&self, text: &str) -> String {
        self.paint(Style::new().bold(), text)
    }
    pub fn good(&self, text: &str) -> String {
        self.paint(Style::new().green(), text)
    }
    pub fn bad(&self, text: &str) -> String {
        self.paint(Style::new().red(), text)
    }
    pub fn warn(&self, text: &str) -> String {
        self.paint(Style::new().yellow(), text)
    }
    pub fn code(&self, text: &str) -> String {
        self.paint(Style::new().cyan(), text)
    }
}

/// Renders Markdown one line at a time (a code fence spans lines, so it keeps that state).
#[derive(Debug)]
pub struct Markdown {
    look: Look,
    in_fence: bool,
}

impl Markdown {
    pub fn new(look: Look) -> Self {
        Self {
            look,
            in_fence: false,
        }
    }

    /// A whole text, line by line.
    pub fn text(&mut self, text: &str) -> String {
        text.lines()
            .map(|l| self.line(l))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// One complete line (without its newline).
    pub fn line(&mut self, raw: &str) -> String {
        if !self.look.styled {
            return raw.to_string();
        }
        if raw.trim_start().starts_with("```") {
            self.in_fence = !self.in_fence;
            return self.look.dim(raw);
        }
        if self.in_fence {
            return self.look.code(raw);
        }
        let indent: String = raw.chars().take_while(|c| *c == ' ').collect();
        format!("{indent}{}", self.inline(raw.trim_start()))
    }

    fn inline(&self, text: &str) -> String {
        let mut out = String::new();
        let mut styles: Vec<Style> = Vec::new();
        let mut lists: Vec<Option<u64>> = Vec::new();
        let mut link: Option<String> = None;
        // Nested styles end together with their text, so painting layer over layer is exact.
        let push = |out: &mut String, styles: &[Style], text: &str| {
            let painted = styles
                .iter()
                .fold(text.to_string(), |t, s| self.look.paint(s.clone(), &t));
            out.push_str(&painted);
        };
        for event in Parser::new_ext(text, Options::ENABLE_STRIKETHROUGH) {
            match event {
                Event::Start(Tag::Heading { level, .. }) => {
                    let style = match level {
                        HeadingLevel::H1 => Style::new().bold().underlined(),
                        _ => Style::new().bold(),
                    };
                    styles.push(style);
                }
                Event::Start(Tag::Strong) => styles.push(Style::new().bold()),
                Event::Start(Tag::Emphasis) => styles.push(Style::new().italic()),
                Event::Start(Tag::Strikethrough) => styles.push(Style::new().strikethrough()),
                Event::Start(Tag::BlockQuote(_)) => {
                    out.push_str(&self.look.dim("│ "));
                    styles.push(Style::new().dim());
                }
                Event::Start(Tag::Link { dest_url, .. }) => {
                    styles.push(Style::new().underlined());
                    link = Some(dest_url.to_string());
                }
                Event::Start(Tag::List(first)) => lists.push(first),
                Event::Start(Tag::Item) => match lists.last_mut() {
                    Some(Some(n)) => {
                        out.push_str(&format!("{n}. "));
                        *n += 1;
                    }
                    _ => out.push_str("• "),
                },
                Event::End(
                    TagEnd::Heading(_)
                    | TagEnd::Strong
                    | TagEnd::Emphasis
                    | TagEnd::Strikethrough
                    | TagEnd::BlockQuote(_),
                ) => {
                    styles.pop();
                }
                Event::End(TagEnd::Link) => {
                    styles.pop();
                    if let Some(url) = link.take().filter(|u| !out.ends_with(u.as_str())) {
                        out.push_str(&self.look.dim(&format!(" ({url})")));
                    }
                }
                Event::End(TagEnd::List(_)) => {
                    lists.pop();
                }
                Event::Text(t) => push(&mut out, &styles, &t),
                Event::Code(c) => out.push_str(&self.look.code(&c)),
                Event::Html(h) | Event::InlineHtml(h) => out.push_str(&h),
                Event::SoftBreak | Event::HardBreak => out.push(' '),
                Event::Rule => out.push_str(&self.look.dim(&"─".repeat(40))),
                Event::TaskListMarker(done) => out.push_str(if done { "[x] " } else { "[ ] " }),
                _ => {}
            }
        }
        out
    }
}

/// An answer written as its deltas arrive. Plain: the deltas as they are. Styled: the line
/// being written shows raw; once its newline arrives it is erased and written rendered.
#[derive(Debug)]
pub struct AnswerStream {
    markdown: Markdown,
    look: Look,
    styled: bool,
    /// The incomplete last line.
    partial: String,
    /// Bytes of `partial` already on the screen.
    shown: usize,
    /// Anything written since the stream opened.
    open: bool,
    ends_in_newline: bool,
}

impl AnswerStream {
    pub fn new(look: Look) -> Self {
        Self {
            markdown: Markdown::new(look),
            look,
            styled: look.styled,
            partial: String::new(),
            shown: 0,
            open: false,
            ends_in_newline: true,
        }
    }

    /// Whether text was written and the stream not finished.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// What to write for `delta` on a terminal `cols` wide.
    pub fn push(&mut self, delta: &str, cols: usize) -> String {
        if delta.is_empty() {
            return String::new();
        }
        self.open = true;
        self.ends_in_newline = delta.ends_with('\n');
        if !self.styled {
            return delta.to_string();
        }
        self.partial.push_str(delta);
        let mut out = String::new();
        while let Some(end) = self.partial.find('\n') {
            let line: String = self.partial[..end].to_string();
            out.push_str(&erase(&self.partial[..self.shown.min(end)], cols));
            out.push_str(&self.markdown.line(&line));
            out.push('\n');
            self.partial.drain(..=end);
            self.shown = 0;
        }
        out.push_str(&self.partial[self.shown..]);
        self.shown = self.partial.len();
        out
    }

    /// What to write to close the stream: the last line rendered and a newline.
    pub fn finish(&mut self, cols: usize) -> String {
        if !self.open {
            return String::new();
        }
        self.open = false;
        let markdown = std::mem::replace(&mut self.markdown, Markdown::new(self.look));
        if !self.styled {
            return if self.ends_in_newline {
                String::new()
            } else {
                "\n".into()
            };
        }
        let line = std::mem::take(&mut self.partial);
        let shown = std::mem::replace(&mut self.shown, 0);
        if line.is_empty() {
            return String::new();
        }
        let mut markdown = markdown;
        format!("{}{}\n", erase(&line[..shown], cols), markdown.line(&line))
    }
}

/// Move back over `raw` (written from the start of a line on a terminal `cols` wide) and clear
/// from there to the end of the screen.
fn erase(raw: &str, cols: usize) -> String {
    if raw.is_empty() {
        return String::new();
    }
    let width = UnicodeWidthStr::width(raw);
    let up = width.saturating_sub(1) / cols.max(1);
    if up == 0 {
        "\r\u{1b}[J".into()
    } else {
        format!("\r\u{1b}[{up}A\u{1b}[J")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STYLED: Look = Look { styled: true };
    const PLAIN: Look = Look { styled: false };

    /// What a terminal shows for `s` written on a fresh line (styles and returns dropped).
    fn strip(s: &str) -> String {
        console::strip_ansi_codes(s).replace('\r', "")
    }

    #[test]
    fn plain_markdown_is_left_as_written() {
        let mut md = Markdown::new(PLAIN);
        assert_eq!(md.line("**bold** and `code`"), "**bold** and `code`");
    }

    #[test]
    fn styled_markdown_drops_the_markup_and_keeps_the_words() {
        let mut md = Markdown::new(STYLED);
        let line = md.line("**bold** and `code`");
        assert_eq!(strip(&line), "bold and code");
        assert!(line.contains("\u{1b}[1m"), "bold is styled: {line:?}");
        assert_eq!(strip(&md.line("# Title")), "Title");
        assert_eq!(strip(&md.line("- one")), "• one");
        assert_eq!(strip(&md.line("  - nested")), "  • nested");
        assert_eq!(strip(&md.line("3. third")), "3. third");
        assert_eq!(
            strip(&md.line("see [docs](https://x.test)")),
            "see docs (https://x.test)"
        );
    }

    #[test]
    fn a_code_fence_keeps_its_lines_verbatim() {
        let mut md = Markdown::new(STYLED);
        md.line("```rust");
        assert_eq!(strip(&md.line("let **x** = 1;")), "let **x** = 1;");
        md.line("```");
        assert_eq!(strip(&md.line("**y**")), "y");
    }

    #[test]
    fn plain_stream_writes_each_delta_once_and_ends_the_line() {
        let mut s = AnswerStream::new(PLAIN);
        let out: String = ["Hel", "lo **wo", "rld**"]
            .iter()
            .map(|d| s.push(d, 80))
            .collect();
        assert_eq!(out + &s.finish(80), "Hello **world**\n");
        assert!(!s.is_open());
    }

    #[test]
    fn styled_stream_redraws_a_completed_line_rendered() {
        let mut s = AnswerStream::new(STYLED);
        assert_eq!(s.push("**Hi", 80), "**Hi");
        let out = s.push("** there\nnext", 80);
        assert!(
            out.starts_with("\r\u{1b}[J"),
            "erases the raw line: {out:?}"
        );
        assert_eq!(strip(&out), "Hi there\nnext");
        let end = s.finish(80);
        assert_eq!(strip(&end), "next\n");
    }

    #[test]
    fn erasing_a_wrapped_line_moves_up_its_extra_rows() {
        assert_eq!(erase(&"x".repeat(10), 10), "\r\u{1b}[J");
        assert_eq!(erase(&"x".repeat(11), 10), "\r\u{1b}[1A\u{1b}[J");
        // Wide characters take two columns.
        assert_eq!(erase(&"耳".repeat(6), 10), "\r\u{1b}[1A\u{1b}[J");
    }
}
