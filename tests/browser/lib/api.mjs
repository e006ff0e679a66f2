// Writes through the HTTP API, as a producer would, for the console to show.
// `bearer`: the access-token secret sent as a bearer token, when the server
// has tokens.

export function api(base, { bearer } = {}) {
  const auth = bearer ? { authorization: `Bearer ${bearer}` } : {};
  const post = async (path, init) => {
    const resp = await fetch(`${base}${path}`, { method: "POST", ...init, headers: { ...auth, ...init.headers } });
    return { status: resp.status, body: await resp.json() };
  };
  return {
    append: (stream, token, bodies) =>
      post(`/v1/streams/${stream}/records`, {
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ fencing_token: token, records: bodies.map((body) => ({ body })) }),
      }),
    appendRaw: (stream, token, bytes) =>
      post(`/v1/streams/${stream}/records`, {
        headers: { "content-type": "application/octet-stream", "fencing-token": String(token) },
        body: bytes,
      }),
    fence: (stream, token) =>
      post(`/v1/streams/${stream}/fence`, {
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ fencing_token: token }),
      }),
  };
}
