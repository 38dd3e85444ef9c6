/** The path of a request URL, without its query string (auth, access logs and 404 messages use it). */
export function pathOf(url: string): string {
  const query = url.indexOf("?");
  return query === -1 ? url : url.slice(0, query);
}
