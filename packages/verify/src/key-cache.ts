const MAX_CACHED_KEYS = 64;

/**
 * Memoises the key derived from each secret: preparing a key is a measurable part of an HMAC over a
 * small body. Bounded (oldest out first) so a receiver juggling many tenants' secrets cannot grow it
 * without limit.
 */
export function keyCache<Key>(create: (secret: string) => Key): (secret: string) => Key {
  const keys = new Map<string, Key>();
  return (secret) => {
    let key = keys.get(secret);
    if (key === undefined) {
      if (keys.size >= MAX_CACHED_KEYS) keys.delete(keys.keys().next().value as string);
      key = create(secret);
      keys.set(secret, key);
    }
    return key;
  };
}
