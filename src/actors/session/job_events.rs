//! The end of a job a turn waits for ([`JobFinished`]): the waiting turn (current or parked)
//! takes the result and goes on. A copy of the session that does not know the job reads the
//! session again before it lets the event go ([`SessionActor::refresh_then`]).
//!
//! Ends that arrive together are taken together: the first records its result and schedules
//! one run ([`TakeHeardEnds`]), which actix handles only after the messages already in the
//! mailbox — so the ends of a fan-out's children, arriving while the turn stores the first,
//! cost one run and one write between them rather than one each.

use actix::prelude::*;

use super::{JobFinished, SessionActor};
use crate::protocol::JobEvent;
use crate::store::tasks::TurnPhase;
use crate::turn;

impl Handler<JobFinished> for SessionActor {
    type Result = ();

    /// Record the job's result in the waiting turn and let the turn go on. The result is
    /// stored with the turn's next write; a crash before that is covered by the turn asking
    /// the executor for the job's state when it resumes.
    fn handle(&mut self, msg: JobFinished, ctx: &mut Self::Context) {
        self.settling.extend(msg.settle);
        if let Some(cause) = self.unservable.clone() {
            return self.hand_back_or_refuse(None, cause, ctx);
        }
        self.job_finished(msg.event, false, ctx);
    }
}

impl SessionActor {
    /// [`JobFinished`]'s work; `refreshed` once the session was read again because no turn
    /// here waited for the job (this copy may be behind the log).
    fn job_finished(&mut self, event: JobEvent, refreshed: bool, ctx: &mut Context<Self>) {
        // A parked turn's job: that turn becomes the current one, unless the current turn
        // cannot step aside (it waits for the user), in which case the parked turn keeps the
        // result and reads it again when it goes on.
        let owner = self
            .task
            .turn_awaiting(&event.job_id)
            .map(|t| t.turn_id.clone());
        if let Some(owner) = owner {
            if !self.task.unpark(&owner) {
                if let Some(job) = self
                    .task
                    .parked
                    .iter_mut()
                    .flat_map(|t| t.jobs.iter_mut())
                    .find(|j| j.result.is_none() && j.job_id == event.job_id)
                {
                    if let Some(result) = turn::finished_by(job, &event) {
                        job.result = Some((&result).into());
                    }
                }
                self.finished();
                return;
            }
        }
        let awaited = self.task.unfinished_turn_mut().and_then(|t| {
            t.jobs
                .iter_mut()
                .find(|j| j.result.is_none() && j.job_id == event.job_id)
        });
        let Some(job) = awaited else {
            if refreshed {
                self.finished();
            } else {
                self.refresh_then(ctx, move |act, ctx, behind| {
                    // Still nobody's job after the read: when this copy was behind, a turn
                    // the read shows waiting for a job looks at its jobs again (their ends may
                    // have been dropped while this copy was behind), as parked turns do.
                    let waits_for_job = act
                        .task
                        .unfinished_turn()
                        .is_some_and(|t| t.phase == TurnPhase::WaitingJob);
                    if act.task.turn_awaiting(&event.job_id).is_some() {
                        act.job_finished(event, true, ctx);
                    } else if behind && waits_for_job {
                        act.run(ctx);
                    } else if behind {
                        act.after_turn(ctx);
                    } else {
                        act.finished();
                    }
                });
            }
            return;
        };
        let Some(result) = turn::finished_by(job, &event) else {
            return self.finished();
        };
        tracing::info!(session = %self.session, job = %job.job_id, "job finished; the waiting turn goes on");
        job.result = Some((&result).into());
        if refreshed {
            // This copy read the session again: anything may have ended unheard.
            return self.run(ctx);
        }
        let turn_id = self.task.unfinished_turn().map(|t| t.turn_id.clone());
        match &self.heard {
            None => {
                self.heard = turn_id;
                ctx.notify(TakeHeardEnds);
            }
            // A run of this turn is scheduled: it stores this result with the others.
            Some(scheduled) if turn_id.as_ref() == Some(scheduled) => {
                self.router.done(&self.key());
            }
            // Another turn's (a parked one that stepped in): it runs now.
            Some(_) => self.run_knowing(turn::Awaited::Heard, ctx),
        }
    }
}

/// Run the turn whose job ends were heard, once the ends already in the mailbox are recorded.
#[derive(Message)]
#[rtype(result = "()")]
struct TakeHeardEnds;

impl Handler<TakeHeardEnds> for SessionActor {
    type Result = ();

    fn handle(&mut self, _: TakeHeardEnds, ctx: &mut Self::Context) {
        let Some(turn_id) = self.heard.take() else {
            return;
        };
        if self
            .task
            .unfinished_turn()
            .is_some_and(|t| t.turn_id == turn_id)
        {
            // This copy heard every end since the wait began: the turn asks about no other.
            self.run_knowing(turn::Awaited::Heard, ctx);
        } else {
            // A newer message parked the turn meanwhile (its results wait in its record), or
            // a cancel ended it.
            self.after_turn(ctx);
        }
    }
}
