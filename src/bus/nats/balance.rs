//! Spreading session partitions over the live session processes.
//!
//! Pinning ([`super::cluster`]) makes each partition's owner unique, but by itself it pins
//! every partition to the first process that pulls. To spread the load, every session process
//! announces itself on [`MEMBERS_SUBJECT`] every third of the failover time, and each
//! partition has a *preferred* process among those heard lately: the one with the highest
//! rendezvous hash of (process, partition). A process pulls only the partitions it prefers;
//! when a process joins, the current owners of the partitions it now prefers finish the
//! items they hold and unpin; when one goes silent for the failover time, the others drop it
//! from their view and pull its partitions, which the server pins to them once the dead
//! owner's pin times out. Views that disagree for a moment cost a pause of one announcement
//! interval, never a second owner: the server pins one client per partition.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::{Deserialize, Serialize};

/// Where session processes announce themselves.
pub const MEMBERS_SUBJECT: &str = "hermes.cluster.sessions";

/// One announcement on [`MEMBERS_SUBJECT`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Announcement {
    /// The process's member id (random per process start).
    pub id: String,
    /// Partitions this process received items of since its previous announcement or holds
    /// pinned (as far as it knows).
    pub owned: Vec<u32>,
    /// Sent once by a process that stops: forget it at once.
    #[serde(default)]
    pub leaving: bool,
}

/// This process's view of the live session processes.
pub struct Membership {
    me: String,
    partitions: u32,
    ttl: Duration,
    peers: Mutex<HashMap<String, Instant>>,
    owned: Vec<AtomicBool>,
}

impl Membership {
    /// A member that has not announced itself for `ttl` is taken as gone.
    pub fn new(partitions: u32, ttl: Duration) -> Self {
        let me = uuid::Uuid::new_v4().simple().to_string();
        let mut peers = HashMap::new();
        peers.insert(me.clone(), Instant::now());
        Self {
            me,
            partitions: partitions.max(1),
            ttl,
            peers: Mutex::new(peers),
            owned: (0..partitions.max(1))
                .map(|_| AtomicBool::new(false))
                .collect(),
        }
    }

    pub fn id(&self) -> &str {
        &self.me
    }

    /// Take in another process's announcement (our own is ignored).
    pub fn heard(&self, announcement: &Announcement) {
        if announcement.id == self.me {
            return;
        }
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        if announcement.leaving {
            peers.remove(&announcement.id);
        } else {
            peers.insert(announcement.id.clone(), Instant::now());
        }
    }

    /// The live members, this process included.
    pub fn live(&self) -> Vec<String> {
        let now = Instant::now();
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        let ttl = self.ttl;
        let me = self.me.clone();
        peers.retain(|id, seen| *id == me || now.duration_since(*seen) < ttl);
        peers.keys().cloned().collect()
    }

    /// Whether this process is the preferred owner of `partition` among the live members.
    pub fn prefers_me(&self, partition: u32) -> bool {
        preferred(&self.live(), partition).is_some_and(|id| id == self.me)
    }

    /// Note that this process holds (or no longer holds) `partition`.
    pub fn set_owned(&self, partition: u32, owned: bool) {
        if let Some(flag) = self.owned.get(partition as usize) {
            flag.store(owned, Ordering::Relaxed);
        }
    }

    pub fn owns(&self, partition: u32) -> bool {
        self.owned
            .get(partition as usize)
            .is_some_and(|flag| flag.load(Ordering::Relaxed))
    }

    pub fn announcement(&self, leaving: bool) -> Announcement {
        Announcement {
            id: self.me.clone(),
            owned: (0..self.partitions)
                .filter(|p| self.owned[*p as usize].load(Ordering::Relaxed))
                .collect(),
            leaving,
        }
    }
}

/// The member that prefers `partition`: the highest rendezvous hash, so a member joining or
/// leaving moves only the partitions it wins or held.
pub fn preferred(members: &[String], partition: u32) -> Option<&str> {
    members
        .iter()
        .max_by_key(|id| rendezvous(id, partition))
        .map(String::as_str)
}

fn rendezvous(member: &str, partition: u32) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0100_0000_01b3;
    let mut hash = OFFSET;
    for byte in member.bytes().chain(partition.to_be_bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(PRIME);
    }
    // FNV's low bits mix poorly for close inputs; a final avalanche spreads them.
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
    hash ^ (hash >> 33)
}

/// Announce this process and listen to the others until `membership` is dropped elsewhere.
pub async fn run(client: async_nats::Client, membership: Arc<Membership>, every: Duration) {
    let mut heard = match client.subscribe(MEMBERS_SUBJECT).await {
        Ok(subscription) => subscription,
        Err(e) => {
            tracing::warn!(error = %e, "cannot hear other session processes; this one will own every partition it is given");
            return;
        }
    };
    let mut ticker = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                if Arc::strong_count(&membership) == 1 {
                    return;
                }
                if let Ok(payload) = serde_json::to_vec(&membership.announcement(false)) {
                    let _ = client.publish(MEMBERS_SUBJECT, payload.into()).await;
                }
            }
            message = heard.next() => {
                let Some(message) = message else { return };
                if let Ok(announcement) = serde_json::from_slice::<Announcement>(&message.payload) {
                    membership.heard(&announcement);
                }
            }
        }
    }
}

/// Tell the others this process stops, so they prefer its partitions at once.
pub async fn leave(client: &async_nats::Client, membership: &Membership) {
    if let Ok(payload) = serde_json::to_vec(&membership.announcement(true)) {
        let _ = client.publish(MEMBERS_SUBJECT, payload.into()).await;
        let _ = client.flush().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("member-{i}")).collect()
    }

    #[test]
    fn every_partition_has_one_preferred_member_and_the_load_spreads() {
        let all = members(4);
        let mut counts = HashMap::new();
        for p in 0..64 {
            *counts.entry(preferred(&all, p).unwrap()).or_insert(0) += 1;
        }
        assert_eq!(counts.len(), 4, "{counts:?}");
        assert!(counts.values().all(|c| *c >= 8), "{counts:?}");
    }

    #[test]
    fn a_member_leaving_moves_only_its_own_partitions() {
        let all = members(3);
        let fewer: Vec<String> = all[..2].to_vec();
        for p in 0..64 {
            let before = preferred(&all, p).unwrap();
            if before != "member-2" {
                assert_eq!(preferred(&fewer, p).unwrap(), before);
            }
        }
    }

    #[test]
    fn a_silent_member_is_forgotten_after_the_ttl() {
        let view = Membership::new(16, Duration::from_millis(50));
        view.heard(&Announcement {
            id: "other".into(),
            owned: vec![],
            leaving: false,
        });
        assert_eq!(view.live().len(), 2);
        std::thread::sleep(Duration::from_millis(80));
        assert_eq!(view.live(), vec![view.id().to_string()]);
        assert!((0..16).all(|p| view.prefers_me(p)));
    }

    #[test]
    fn a_leaving_member_is_forgotten_at_once() {
        let view = Membership::new(16, Duration::from_secs(60));
        let mut other = Announcement {
            id: "other".into(),
            owned: vec![],
            leaving: false,
        };
        view.heard(&other);
        other.leaving = true;
        view.heard(&other);
        assert_eq!(view.live().len(), 1);
    }
}
