// Where a queue lives with SHARDS > 1, computed as the broker documents it (docs/decisions.md, "Shards"),
// so tests can pick queue names on chosen shards and check that ids name their shard.

/** FNV-1a 64 of the queue name's UTF-8 bytes, modulo the shard count. */
function shardOfQueue(name, count) {
  let h = 0xcbf29ce484222325n;
  for (const b of Buffer.from(name, 'utf8')) {
    h ^= BigInt(b);
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return Number(h % BigInt(count));
}

/**
 * Placement helpers for a broker of `shards` shards: `shardOf(name, count = shards)`, and
 * `onDistinctShards(prefix, count)`, `count` queue names `prefix<i>`, each on a different shard.
 */
export function placementFor(shards) {
  const shardOf = (name, count = shards) => shardOfQueue(name, count);
  const onDistinctShards = (prefix, count) => {
    const names = [];
    const used = new Set();
    for (let i = 0; names.length < count; i++) {
      const name = `${prefix}${i}`;
      if (!used.has(shardOf(name))) {
        used.add(shardOf(name));
        names.push(name);
      }
    }
    return names;
  };
  return { shardOf, onDistinctShards };
}
