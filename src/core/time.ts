/** The time now in whole Unix seconds, as OpenAI's objects carry it (`created`, `created_at`, …). */
export const unixSeconds = (): number => Math.floor(Date.now() / 1000);
