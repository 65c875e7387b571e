//! The terminal between prompts. While a turn runs, typed keys are neither echoed into its
//! output nor held until Enter ([`Quiet`]); Ctrl-C still raises SIGINT, which cancels the
//! turn. While a turn waits for a job, [`KeyWatch`] notices the first key so the prompt can
//! come back at once — without reading it: the line editor reads it as the first key of the
//! new line.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const STDIN: RawFd = 0;

/// Keys neither echoed nor buffered by line while set; the saved mode comes back on
/// [`Quiet::restore`] and on drop.
pub struct Quiet {
    saved: Option<libc::termios>,
}

impl Quiet {
    pub fn new() -> Self {
        Self { saved: None }
    }

    /// Stop echo and line buffering (signals stay on).
    pub fn enter(&mut self) {
        if self.saved.is_some() {
            return;
        }
        // SAFETY: tcgetattr fills the termios it is given; on failure it is not used.
        let mut mode: libc::termios = unsafe { std::mem::zeroed() };
        if unsafe { libc::tcgetattr(STDIN, &mut mode) } != 0 {
            return;
        }
        let saved = mode;
        mode.c_lflag &= !(libc::ICANON | libc::ECHO);
        mode.c_cc[libc::VMIN] = 1;
        mode.c_cc[libc::VTIME] = 0;
        // SAFETY: a valid termios for our own stdin.
        if unsafe { libc::tcsetattr(STDIN, libc::TCSANOW, &mode) } == 0 {
            self.saved = Some(saved);
        }
    }

    /// The mode from before [`Quiet::enter`].
    pub fn restore(&mut self) {
        if let Some(saved) = self.saved.take() {
            // SAFETY: the termios read from this very descriptor.
            unsafe { libc::tcsetattr(STDIN, libc::TCSANOW, &saved) };
        }
    }
}

impl Drop for Quiet {
    fn drop(&mut self) {
        self.restore();
    }
}

/// Tells once, when armed, that a key is waiting on stdin.
pub struct KeyWatch {
    armed: Arc<AtomicBool>,
    arm: std::sync::mpsc::Sender<()>,
    pub pressed: tokio::sync::mpsc::UnboundedReceiver<()>,
}

impl KeyWatch {
    pub fn start() -> Self {
        let armed = Arc::new(AtomicBool::new(false));
        let (arm, armings) = std::sync::mpsc::channel::<()>();
        let (tell, pressed) = tokio::sync::mpsc::unbounded_channel();
        let watching = armed.clone();
        std::thread::Builder::new()
            .name("hermes-chat-keys".into())
            .spawn(move || {
                for () in armings {
                    while watching.load(Ordering::Acquire) {
                        let mut fd = libc::pollfd {
                            fd: STDIN,
                            events: libc::POLLIN,
                            revents: 0,
                        };
                        // SAFETY: one valid pollfd; 100 ms so a disarm is seen soon.
                        let ready = unsafe { libc::poll(&mut fd, 1, 100) };
                        if ready > 0 && watching.swap(false, Ordering::AcqRel) {
                            let _ = tell.send(());
                        }
                    }
                }
            })
            .ok();
        Self {
            armed,
            arm,
            pressed,
        }
    }

    /// Watch for the next key.
    pub fn arm(&self) {
        if !self.armed.swap(true, Ordering::AcqRel) {
            let _ = self.arm.send(());
        }
    }

    pub fn disarm(&mut self) {
        self.armed.store(false, Ordering::Release);
        while self.pressed.try_recv().is_ok() {}
    }
}
