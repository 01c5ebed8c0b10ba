// What this phone keeps, in IndexedDB (shared by the page and the service worker): the
// pairing (with the device's non-extractable private key as a CryptoKey) and a short history.
// Never a nonce, a digest or a pairing secret: an opened question lives in memory only.

const DB = 'agentnotify';
const HISTORY_MAX = 50;

let dbPromise = null;
function db() {
  if (!dbPromise) {
    dbPromise = new Promise((resolve, reject) => {
      const req = indexedDB.open(DB, 1);
      req.onupgradeneeded = () => {
        req.result.createObjectStore('device');
        req.result.createObjectStore('history', { keyPath: 'id' });
      };
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
  }
  return dbPromise;
}

async function run(store, mode, fn) {
  const d = await db();
  return new Promise((resolve, reject) => {
    const tx = d.transaction(store, mode);
    const result = fn(tx.objectStore(store));
    tx.oncomplete = () => resolve(result && 'result' in result ? result.result : undefined);
    tx.onerror = () => reject(tx.error);
    tx.onabort = () => reject(tx.error);
  });
}

/** The paired device, or null. */
export const loadDevice = () => run('device', 'readonly', (s) => s.get('current')).then((d) => d || null);
export const saveDevice = (device) => run('device', 'readwrite', (s) => s.put(device, 'current'));
export const forgetDevice = () => run('device', 'readwrite', (s) => s.delete('current'));

/** Newest first. */
export async function loadHistory() {
  const all = (await run('history', 'readonly', (s) => s.getAll())) || [];
  return all.sort((a, b) => (b.at < a.at ? -1 : b.at > a.at ? 1 : 0));
}

/** Adds or updates one entry (by interaction id), keeping the newest HISTORY_MAX. */
export async function remember(entry) {
  const clean = { ...entry, at: entry.at || new Date().toISOString() };
  delete clean.nonce;
  delete clean.request_digest;
  await run('history', 'readwrite', (s) => s.put(clean));
  const all = await loadHistory();
  if (all.length > HISTORY_MAX) {
    await run('history', 'readwrite', (s) => {
      for (const old of all.slice(HISTORY_MAX)) s.delete(old.id);
    });
  }
}

export const clearHistory = () => run('history', 'readwrite', (s) => s.clear());
