/**
 * A value made at its first use and kept: for what costs time to build (a zod schema, a compiled
 * expression) and is not needed by every cold start, so INIT does not pay for it.
 *
 * @example
 * const answerSchema = lazy(() => z.object({ action: z.string() }));
 * answerSchema().safeParse(body);
 */
export function lazy<T>(make: () => T): () => T {
  let made: { value: T } | undefined;
  return () => {
    made ??= { value: make() };
    return made.value;
  };
}
