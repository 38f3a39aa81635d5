//! The sans-IO broker core (being written).
