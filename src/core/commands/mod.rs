//! The broker's administrative and multi-step commands, one module per family: queues, dead letters,
//! consumer groups, transactions, retention. (Push, pop and ack live in `core::push`, `core::pop`,
//! `core::ack`; read views in `core::views`.)

mod dead_letters;
mod groups;
mod queues;
mod retention;
mod transaction;
