// An answer of the API that is not a success, with the API's own text: a LogQL parse error
// reads as the server wrote it, position and all.
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export async function errorText(res) {
  const text = (await res.text()).trim();
  if ((res.headers.get('content-type') || '').includes('json')) {
    try {
      const body = JSON.parse(text);
      return body.error || body.message || text;
    } catch { /* not JSON after all: the text as it came */ }
  }
  return text || `${res.status} ${res.statusText}`;
}

