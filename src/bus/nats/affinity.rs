//! A NATS connection of the actor thread itself, for what a session sends on the hot path.
//!
//! With one connection on the I/O runtime, every message a session actor sent crossed two
//! threads (the arbiter handed the command to the connection task on `hermes-io`, which woke
//! to write it) and every reply crossed them back: about four context switches per JetStream
//! append, a third of a NATS turn's CPU. A session arbiter with a connection of its own writes
//! and reads its socket on its own thread, so a request and its reply cost what the network
//! costs.
//!
//! [`attach`] opens such a connection on the calling thread (an actor arbiter, at start) for
//! one bus; [`client`] and [`jetstream`] return it to code running on that thread, and `None`
//! elsewhere, where the bus's own connection is used. Subscriptions and consumers stay on the
//! I/O runtime's connection, which nothing on an arbiter can hold up.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use async_nats::jetstream::Context;
use async_nats::Client;

/// This thread's connections, by the id of the bus they belong to (tests run several buses).
struct Attached {
    bus: u64,
    client: Client,
    jetstream: Context,
}

thread_local! {
    static HERE: RefCell<Vec<Attached>> = const { RefCell::new(Vec::new()) };
}

/// A new id for a bus, distinct from every other in this process.
pub fn next_bus_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Keep `client` as this thread's connection to bus `bus` (replacing an earlier one).
pub fn attach(bus: u64, client: Client) {
    let jetstream = async_nats::jetstream::new(client.clone());
    HERE.with_borrow_mut(|here| {
        here.retain(|a| a.bus != bus);
        here.push(Attached {
            bus,
            client,
            jetstream,
        });
    });
}

/// Whether this thread has a connection of its own to bus `bus`.
pub fn attached(bus: u64) -> bool {
    HERE.with_borrow(|here| here.iter().any(|a| a.bus == bus))
}

/// This thread's connection to bus `bus`, if it has one.
pub fn client(bus: u64) -> Option<Client> {
    HERE.with_borrow(|here| here.iter().find(|a| a.bus == bus).map(|a| a.client.clone()))
}

/// This thread's JetStream context on bus `bus`, if it has a connection of its own.
pub fn jetstream(bus: u64) -> Option<Context> {
    HERE.with_borrow(|here| {
        here.iter()
            .find(|a| a.bus == bus)
            .map(|a| a.jetstream.clone())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_ids_are_distinct() {
        assert_ne!(next_bus_id(), next_bus_id());
    }

    #[test]
    fn a_thread_without_a_connection_of_its_own_gets_none() {
        let bus = next_bus_id();
        assert!(!attached(bus));
        assert!(client(bus).is_none());
        assert!(jetstream(bus).is_none());
    }
}
