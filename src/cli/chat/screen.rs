//! Where the chat writes: the terminal (through the line editor's printer, so a line that
//! arrives while the person types appears above the prompt, not inside it) or plain stdout.
//! Spinners (indicatif) live here too, on a terminal only, and never while the prompt shows.

use std::io::Write;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use rustyline::ExternalPrinter;

use super::render::Look;

/// A printer that can write while the line editor owns the terminal.
pub type Printer = Box<dyn ExternalPrinter + Send>;

pub struct Screen {
    pub look: Look,
    printer: Option<Printer>,
    /// Tests read what was written here instead of stdout.
    #[cfg(test)]
    pub written: Option<std::sync::Arc<std::sync::Mutex<String>>>,
    bars: MultiProgress,
    live: bool,
    /// The prompt shows: only whole lines may be written (above it).
    prompting: bool,
    /// Text of an unfinished line written while prompting.
    held: String,
}

impl Screen {
    /// `printer`: the editor's (a terminal); none: plain stdout, no spinners.
    pub fn new(look: Look, printer: Option<Printer>) -> Self {
        let live = printer.is_some();
        let target = if live {
            ProgressDrawTarget::stdout()
        } else {
            ProgressDrawTarget::hidden()
        };
        Self {
            look,
            printer,
            bars: MultiProgress::with_draw_target(target),
            live,
            prompting: false,
            held: String::new(),
            #[cfg(test)]
            written: None,
        }
    }

    /// A plain screen whose output collects in the returned string.
    #[cfg(test)]
    pub fn buffer() -> (Self, std::sync::Arc<std::sync::Mutex<String>>) {
        let written = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let mut screen = Self::new(Look { styled: false }, None);
        screen.written = Some(written.clone());
        (screen, written)
    }

    /// The terminal's width (80 when unknown).
    pub fn cols(&self) -> usize {
        match console::Term::stdout().size_checked() {
            Some((_, cols)) if self.live && cols > 0 => usize::from(cols),
            _ => 80,
        }
    }

    /// The prompt shows (`true`) or not.
    pub fn prompting(&mut self, on: bool) {
        self.prompting = on;
        if !on && !self.held.is_empty() {
            let held = std::mem::take(&mut self.held);
            self.emit(held);
        }
    }

    /// Write `text` as it is (it may end mid-line).
    pub fn write(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        if self.prompting {
            self.held.push_str(text);
            if let Some(end) = self.held.rfind('\n') {
                let lines: String = self.held.drain(..=end).collect();
                self.emit(lines);
            }
            return;
        }
        self.emit(text.to_string());
    }

    /// Write one line.
    pub fn line(&mut self, text: &str) {
        self.write(&format!("{text}\n"));
    }

    /// A spinner showing `message` in `template` (indicatif's syntax); none off a terminal.
    pub fn spinner(&mut self, template: &str, message: &str) -> Option<ProgressBar> {
        if !self.live || self.prompting {
            return None;
        }
        let style = ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_spinner())
            .tick_chars("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏ ");
        let bar = self.bars.add(ProgressBar::new_spinner().with_style(style));
        bar.set_message(message.to_string());
        bar.enable_steady_tick(Duration::from_millis(100));
        Some(bar)
    }

    /// Take `bar` away and write `line` in its place.
    pub fn finish(&mut self, bar: &ProgressBar, line: &str) {
        self.clear(bar);
        self.line(line);
    }

    /// Take `bar` away.
    pub fn clear(&mut self, bar: &ProgressBar) {
        bar.finish_and_clear();
        self.bars.remove(bar);
    }

    fn emit(&mut self, text: String) {
        #[cfg(test)]
        if let Some(written) = &self.written {
            written.lock().unwrap().push_str(&text);
            return;
        }
        let printer = &mut self.printer;
        self.bars.suspend(|| match printer {
            Some(p) => {
                if let Err(e) = p.print(text) {
                    tracing::debug!(error = %e, "terminal write failed");
                }
            }
            None => {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(text.as_bytes());
                let _ = out.flush();
            }
        });
    }
}
