/**
 * A small handbook for conversation tests: "How long does that take?" alone matches the backups
 * document best, so only a search that carries the earlier question finds the API keys one.
 */
export const HANDBOOK = [
  {
    id: "keys",
    title: "Rotating API keys",
    text:
      "# Rotating API keys\n\nTo rotate the API keys, create a new key in the console, deploy it to every " +
      "service, then revoke the old key. A rotation takes about ten minutes. The security team approves " +
      "each rotation.",
  },
  {
    id: "backups",
    title: "Restoring backups",
    text:
      "# Restoring backups\n\nHow long a restore takes depends on the size of the database: a long restore " +
      "takes two hours. The operations team approves each restore.",
  },
  {
    id: "holidays",
    title: "Holidays",
    text: "Everyone gets twenty-five days of holiday a year. Ask your manager before booking.",
  },
];
