//! `hermes` in a pseudo-terminal, read back as the screen a person would see: expectrl
//! spawns it on a real pty, and everything it writes goes through a vt100 emulator, so
//! redrawn lines, spinners and cleared rows count as the terminal shows them, not as bytes.

use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

use expectrl::session::OsSession as Session;

pub const ROWS: u16 = 40;
pub const COLS: u16 = 100;

fn size(n: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(n).expect("a terminal size above zero")
}

pub struct Pty {
    session: Session,
    screen: vt100::Parser,
    /// Every byte the program wrote, for a failure's report.
    raw: Vec<u8>,
}

impl Pty {
    /// Start `cmd` on a pty `COLS`×`ROWS` (TERM=xterm-256color).
    pub fn spawn(mut cmd: Command) -> Pty {
        cmd.env("TERM", "xterm-256color");
        let mut session = Session::spawn(cmd).expect("spawn on a pty");
        session
            .get_process_mut()
            .set_window_size(COLS, ROWS)
            .expect("set the pty size");
        Pty {
            session,
            screen: vt100::Parser::new(size(ROWS), size(COLS), 0),
            raw: Vec::new(),
        }
    }

    /// Read what the program wrote so far.
    fn pump(&mut self) -> bool {
        let mut buf = [0u8; 8192];
        let mut any = false;
        loop {
            match self.session.try_read(&mut buf) {
                Ok(0) => return any,
                Ok(n) => {
                    self.screen.process(&buf[..n]);
                    self.raw.extend_from_slice(&buf[..n]);
                    any = true;
                }
                Err(_) => return any,
            }
        }
    }

    /// Every byte written so far, escapes shown as `\u{1b}`.
    pub fn raw(&mut self) -> String {
        self.pump();
        String::from_utf8_lossy(&self.raw)
            .escape_debug()
            .to_string()
    }

    /// The screen now, rows joined by newlines, trailing blanks trimmed.
    pub fn screen(&mut self) -> String {
        self.pump();
        let rows: Vec<String> = self
            .screen
            .screen()
            .rows(0, COLS)
            .map(|r| r.trim_end().to_string())
            .collect();
        rows.join("\n").trim_end().to_string()
    }

    /// Wait until the screen satisfies `done`; panics with `why` and the screen after `limit`.
    pub fn wait_until(&mut self, why: &str, limit: Duration, done: impl Fn(&str) -> bool) {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if done(&screen) {
                return;
            }
            if start.elapsed() > limit {
                panic!("waited {limit:?} for {why}; the screen:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Wait until `text` shows `times` times.
    pub fn wait_for_count(&mut self, text: &str, times: usize) {
        self.wait_until(
            &format!("`{text}` shown {times} time(s)"),
            Duration::from_secs(60),
            |s| s.matches(text).count() >= times,
        );
    }

    /// Wait until `text` shows.
    pub fn wait_for(&mut self, text: &str) {
        self.wait_for_count(text, 1);
    }

    /// Type `text` (no Enter).
    pub fn type_text(&mut self, text: &str) {
        self.session
            .write_all(text.as_bytes())
            .expect("write to the pty");
        self.session.flush().expect("flush the pty");
    }

    /// Type `text` and Enter.
    pub fn line(&mut self, text: &str) {
        self.type_text(text);
        // Enter as a separate key press, as a person types it.
        std::thread::sleep(Duration::from_millis(50));
        self.type_text("\r");
    }

    pub fn ctrl_c(&mut self) {
        self.type_text("\u{3}");
    }

    pub fn ctrl_d(&mut self) {
        self.type_text("\u{4}");
    }

    /// Wait for the program to end; its exit code.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<i32> {
        let start = Instant::now();
        while start.elapsed() < limit {
            self.pump();
            match self.session.get_process().status() {
                Ok(ptyprocess::WaitStatus::StillAlive) => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Ok(ptyprocess::WaitStatus::Exited(_, code)) => return Some(code),
                _ => return None,
            }
        }
        panic!("hermes chat did not exit; the screen:\n{}", self.screen());
    }
}
