//! Why a session refused an inbound message, as the `code` of its `error` answer: one enum
//! the session writes and every sender (triggers, clients) reads, so renaming one side
//! cannot silently change what the other does.

use super::envelope::{error_envelope, Envelope, ErrorBody};

/// The refusal codes of a session's inbound subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// Another turn is running.
    Busy,
    /// The session's turn waits for a job to finish.
    AwaitingJob,
    /// The session's turn waits for the user's decision on a high-risk call.
    AwaitingConfirmation,
    /// The session belongs to another user.
    WrongUser,
    /// A confirmation arrived with no undecided call to decide.
    NothingToConfirm,
    /// The message or decision could not be stored; send it again.
    StoreFailed,
    /// An answer to an MCP server's question that does not fit what it asked.
    InvalidAnswer,
}

impl Refusal {
    const ALL: [Refusal; 7] = [
        Self::Busy,
        Self::AwaitingJob,
        Self::AwaitingConfirmation,
        Self::WrongUser,
        Self::NothingToConfirm,
        Self::StoreFailed,
        Self::InvalidAnswer,
    ];

    /// The code on the wire.
    pub fn code(self) -> &'static str {
        match self {
            Self::Busy => "busy",
            Self::AwaitingJob => "awaiting_job",
            Self::AwaitingConfirmation => "awaiting_confirmation",
            Self::WrongUser => "wrong_user",
            Self::NothingToConfirm => "nothing_to_confirm",
            Self::StoreFailed => "store_failed",
            Self::InvalidAnswer => "invalid_answer",
        }
    }

    /// The refusal a code names; `None` for another code.
    pub fn from_code(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.code() == code)
    }

    /// The session is busy with a turn: the same message is welcome once that turn ends.
    pub fn until_the_turn_ends(self) -> bool {
        matches!(
            self,
            Self::Busy | Self::AwaitingJob | Self::AwaitingConfirmation
        )
    }

    /// The `error` answer saying so.
    pub fn answer(self, message: impl Into<String>) -> Envelope<ErrorBody> {
        error_envelope(self.code(), message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_reads_back_from_its_code() {
        for refusal in Refusal::ALL {
            assert_eq!(Refusal::from_code(refusal.code()), Some(refusal));
        }
        assert_eq!(Refusal::from_code("unavailable"), None);
    }
}
