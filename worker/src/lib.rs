//! The queen-edge Cloudflare Worker (being written).
