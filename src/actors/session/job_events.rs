//! The end of a job a turn waits for ([`JobFinished`]): the waiting turn (current or parked)
//! takes the result and goes on. A copy of the session that does not know the job reads the
//! session again before it lets the event go ([`SessionActor::refresh_then`]).

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
        match turn::finished_by(job, &event) {
            Some(result) => {
                tracing::info!(session = %self.session, job = %job.job_id, "job finished; the waiting turn goes on");
                job.result = Some((&result).into());
                self.run(ctx);
            }
            None => self.finished(),
        }
    }
}
