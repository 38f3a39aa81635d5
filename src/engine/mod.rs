//! The async engine (being written).
