import { useEffect, useRef, useState } from 'react';
import { formatNumber } from '../format.js';

const DEFAULT_WIDTH = 600;
const HEIGHT = 220;
const PAD = { top: 12, right: 8, bottom: 28, left: 48 };

/** Rounds the axis maximum up to 1, 2 or 5 × a power of ten, so grid lines fall on readable numbers. */
function niceMax(value: number): number {
  if (value <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (value <= step * power) return step * power;
  return 10 * power;
}

/** A bar per day as inline SVG (no chart library, nothing fetched), with a title on every bar. */
export function BarChart({ points, label, unit, tone }: { points: Array<{ day: string; value: number }>; label: string; unit: string; tone: 'primary' | 'secondary' }) {
  // The drawing is as wide as its box, one unit per CSS pixel, so axis labels stay 11 px on a phone
  // instead of shrinking with the picture.
  const box = useRef<HTMLDivElement>(null);
  const [WIDTH, setWidth] = useState(DEFAULT_WIDTH);
  useEffect(() => {
    const element = box.current;
    if (!element) return;
    const observer = new ResizeObserver(([entry]) => {
      const width = Math.floor(entry?.contentRect.width ?? 0);
      if (width > 0) setWidth(width);
    });
    observer.observe(element);
    return () => observer.disconnect();
  }, []);
  const max = niceMax(Math.max(0, ...points.map((p) => p.value)));
  const innerW = WIDTH - PAD.left - PAD.right;
  const innerH = HEIGHT - PAD.top - PAD.bottom;
  const slot = innerW / Math.max(1, points.length);
  const barW = Math.max(2, slot * 0.7);
  // Small counts get whole-number grid lines only; otherwise quarters of a round maximum.
  const ticks = max <= 4 ? Array.from({ length: max + 1 }, (_, i) => i) : [0, 0.25, 0.5, 0.75, 1].map((f) => f * max);
  const y = (v: number) => PAD.top + innerH - (v / max) * innerH;
  return (
    <div ref={box} className="chart-box">
    <svg className={`chart ${tone}`} viewBox={`0 0 ${WIDTH} ${HEIGHT}`} width={WIDTH} height={HEIGHT} role="img" aria-label={label}>
      {ticks.map((t) => (
        <g key={t}>
          <line className="grid" x1={PAD.left} x2={WIDTH - PAD.right} y1={y(t)} y2={y(t)} />
          <text className="axis" x={PAD.left - 6} y={y(t) + 4} textAnchor="end">
            {formatNumber(Math.round(t))}
          </text>
        </g>
      ))}
      {points.map((p, i) => {
        const h = (p.value / max) * innerH;
        const x = PAD.left + i * slot + (slot - barW) / 2;
        return (
          <g key={p.day}>
            <rect className="bar" x={x} y={PAD.top + innerH - h} width={barW} height={Math.max(0, h)} rx={1.5}>
              <title>{`${p.day}: ${formatNumber(p.value)} ${unit}`}</title>
            </rect>
            {(i === 0 || i === points.length - 1 || (i % 7 === 0 && points.length - 1 - i >= 4)) && (
              <text className="axis" x={x + barW / 2} y={HEIGHT - 8} textAnchor="middle">
                {p.day.slice(5)}
              </text>
            )}
          </g>
        );
      })}
    </svg>
    </div>
  );
}
