//! Queen HTTP API (being written).
