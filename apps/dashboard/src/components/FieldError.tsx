/**
 * A field's validation message under it: `id` is what the field's `aria-describedby` names, and it is announced
 * as it appears. Nothing when there is no message.
 *
 * @example
 * <input aria-describedby={error ? 'name-error' : undefined} … />
 * <FieldError id="name-error" message={error} />
 */
export function FieldError({ id, message, testId }: { id: string; message: string | null | undefined; testId?: string }) {
  if (!message) return null;
  return (
    <span id={id} className="field-error" role="alert" data-testid={testId}>
      {message}
    </span>
  );
}
