/** The path of a request URL, without its query string (auth, access logs and 404 messages use it). */
export function pathOf(url: string): string {
  const query = url.indexOf("?");
  return query === -1 ? url : url.slice(0, query);
}

/**
 * The path as the router may understand it, for access checks: percent-escapes decoded (`/%6detrics`
 * is `/metrics`), runs of slashes collapsed, `.` and `..` segments resolved. A path whose escapes do
 * not decode stays as it was (the router answers it 400). Done repeatedly until stable, so a doubly
 * escaped `%252e` cannot hide a segment either.
 */
export function normalisedPath(url: string): string {
  let current = pathOf(url);
  for (let round = 0; round < 4; round++) {
    let decoded: string;
    try {
      decoded = decodeURIComponent(current);
    } catch {
      decoded = current;
    }
    const segments: string[] = [];
    for (const segment of decoded.split("/")) {
      if (segment === "" || segment === ".") continue;
      if (segment === "..") segments.pop();
      else segments.push(segment);
    }
    const next = "/" + segments.join("/") + (decoded.endsWith("/") && segments.length > 0 ? "/" : "");
    if (next === current) break;
    current = next;
  }
  return current;
}
