import type { HTMLAttributes } from 'react';
import { FieldError } from './FieldError.js';

/** A labelled text input with its validation message next to it (linked for screen readers). */
export function TextField({
  label,
  name,
  value,
  onChange,
  error,
  type = 'text',
  inputMode,
  placeholder,
}: {
  label: string;
  name: string;
  value: string;
  onChange: (value: string) => void;
  error?: string;
  type?: string;
  inputMode?: HTMLAttributes<HTMLInputElement>['inputMode'];
  placeholder?: string;
}) {
  const errorId = `${name}-error`;
  return (
    <label className="field">
      <span>{label}</span>
      <input
        name={name}
        type={type}
        inputMode={inputMode}
        placeholder={placeholder}
        value={value}
        onChange={(e) => onChange(e.target.value)}
        aria-invalid={error ? true : undefined}
        aria-describedby={error ? errorId : undefined}
      />
      <FieldError id={errorId} message={error} testId={errorId} />
    </label>
  );
}
