/**
 * Fewer labelled rows than this pick a threshold by luck more than by signal. A module of its own, exported as
 * `@svc/grounding/min-calibration-rows`, so that a help text can name it without loading the check.
 *
 * @example
 * import { MIN_CALIBRATION_ROWS } from '@svc/grounding/min-calibration-rows';
 */
export const MIN_CALIBRATION_ROWS = 20;
