/**
 * A tiny SVG line chart, no dependencies: series of (x, y) points with markers, linear or log10 axes,
 * ticks, grid, axis titles and a legend. Enough for the plots docs/BENCHMARKS.md shows.
 */

export interface Series {
  name: string;
  points: Array<{ x: number; y: number }>;
  /** Dashed line (e.g. a reference rather than ours). */
  dashed?: boolean;
}

export interface ChartOptions {
  title: string;
  xLabel: string;
  yLabel: string;
  xLog?: boolean;
  yLog?: boolean;
  /** Tick values to use instead of computed ones (e.g. [1, 2, 4, 8]). */
  xTicks?: number[];
  /** Force the y axis to start at 0 (linear axes only). */
  yFromZero?: boolean;
  width?: number;
  height?: number;
}

const COLORS = [
  "#1f77b4",
  "#d62728",
  "#2ca02c",
  "#ff7f0e",
  "#9467bd",
  "#8c564b",
  "#e377c2",
  "#7f7f7f",
  "#17becf",
];

function escapeXml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

/** A short label: 1,200 → "1.2k", 1,000,000 → "1M", 0.05 → "0.05". */
export function tickLabel(value: number): string {
  const abs = Math.abs(value);
  if (abs >= 1e6) return `${Number((value / 1e6).toPrecision(3))}M`;
  if (abs >= 1e3) return `${Number((value / 1e3).toPrecision(3))}k`;
  return String(Number(value.toPrecision(3)));
}

function niceLinearTicks(min: number, max: number, count = 5): number[] {
  if (min === max) return [min];
  const raw = (max - min) / count;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= raw) ?? raw;
  const ticks: number[] = [];
  for (let v = Math.ceil(min / step) * step; v <= max + step * 1e-9; v += step)
    ticks.push(Number(v.toPrecision(12)));
  return ticks;
}

function logTicks(min: number, max: number): number[] {
  const ticks: number[] = [];
  for (let e = Math.floor(Math.log10(min)); e <= Math.ceil(Math.log10(max)); e++) {
    for (const m of [1, 2, 5]) {
      const v = m * 10 ** e;
      if (v >= min * 0.999 && v <= max * 1.001) ticks.push(v);
    }
  }
  // Too many labels on a wide range: keep the powers of ten.
  return ticks.length > 8 ? ticks.filter((v) => Number.isInteger(Math.log10(v))) : ticks;
}

export function lineChart(series: Series[], options: ChartOptions): string {
  const width = options.width ?? 640;
  const height = options.height ?? 380;
  const longestName = Math.max(0, ...series.map((s) => s.name.length));
  const margin = { top: 36, right: Math.max(120, 44 + Math.ceil(longestName * 6.6)), bottom: 52, left: 64 };
  const plotW = width - margin.left - margin.right;
  const plotH = height - margin.top - margin.bottom;
  const usable = series
    .map((s) => ({
      ...s,
      points: s.points.filter(
        (p) =>
          Number.isFinite(p.x) &&
          Number.isFinite(p.y) &&
          (!options.xLog || p.x > 0) &&
          (!options.yLog || p.y > 0),
      ),
    }))
    .filter((s) => s.points.length > 0);
  const xs = usable.flatMap((s) => s.points.map((p) => p.x)).concat(options.xTicks ?? []);
  const ys = usable.flatMap((s) => s.points.map((p) => p.y));
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${margin.left + plotW / 2}" y="20" text-anchor="middle" font-size="14" font-weight="bold">${escapeXml(options.title)}</text>`,
  ];
  if (xs.length === 0 || ys.length === 0) {
    out.push(
      `<text x="${width / 2}" y="${height / 2}" text-anchor="middle" fill="#666">no data yet: run npm run bench</text>`,
      "</svg>",
    );
    return out.join("\n") + "\n";
  }

  let [xMin, xMax] = [Math.min(...xs), Math.max(...xs)];
  let [yMin, yMax] = [Math.min(...ys), Math.max(...ys)];
  if (options.yFromZero && !options.yLog) yMin = 0;
  if (options.xLog) [xMin, xMax] = [xMin / 1.25, xMax * 1.25];
  else if (xMin === xMax) [xMin, xMax] = [xMin - 1, xMax + 1];
  if (options.yLog) [yMin, yMax] = [yMin / 1.5, yMax * 1.5];
  else {
    const pad = (yMax - yMin || Math.abs(yMax) || 1) * 0.08;
    [yMin, yMax] = [options.yFromZero ? 0 : yMin - pad, yMax + pad];
  }
  const scale = (value: number, min: number, max: number, log: boolean | undefined) =>
    log
      ? (Math.log10(value) - Math.log10(min)) / (Math.log10(max) - Math.log10(min))
      : (value - min) / (max - min);
  const px = (x: number) => margin.left + scale(x, xMin, xMax, options.xLog) * plotW;
  const py = (y: number) => margin.top + plotH - scale(y, yMin, yMax, options.yLog) * plotH;

  // Grid and ticks.
  const xTicks = options.xTicks ?? (options.xLog ? logTicks(xMin, xMax) : niceLinearTicks(xMin, xMax));
  const yTicks = options.yLog ? logTicks(yMin, yMax) : niceLinearTicks(yMin, yMax);
  for (const t of xTicks) {
    const x = px(t).toFixed(1);
    out.push(
      `<line x1="${x}" y1="${margin.top}" x2="${x}" y2="${margin.top + plotH}" stroke="#e5e5e5"/>`,
      `<text x="${x}" y="${margin.top + plotH + 16}" text-anchor="middle">${tickLabel(t)}</text>`,
    );
  }
  for (const t of yTicks) {
    const y = py(t).toFixed(1);
    out.push(
      `<line x1="${margin.left}" y1="${y}" x2="${margin.left + plotW}" y2="${y}" stroke="#e5e5e5"/>`,
      `<text x="${margin.left - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${tickLabel(t)}</text>`,
    );
  }
  out.push(
    `<rect x="${margin.left}" y="${margin.top}" width="${plotW}" height="${plotH}" fill="none" stroke="#333"/>`,
    `<text x="${margin.left + plotW / 2}" y="${height - 12}" text-anchor="middle">${escapeXml(options.xLabel)}</text>`,
    `<text transform="translate(16 ${margin.top + plotH / 2}) rotate(-90)" text-anchor="middle">${escapeXml(options.yLabel)}</text>`,
  );

  // Series and legend.
  usable.forEach((s, i) => {
    const color = COLORS[i % COLORS.length]!;
    const points = [...s.points].sort((a, b) => a.x - b.x);
    const path = points
      .map((p, j) => `${j === 0 ? "M" : "L"}${px(p.x).toFixed(1)} ${py(p.y).toFixed(1)}`)
      .join(" ");
    out.push(
      `<path d="${path}" fill="none" stroke="${color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="6 4"' : ""}/>`,
    );
    for (const p of points) {
      out.push(
        `<circle cx="${px(p.x).toFixed(1)}" cy="${py(p.y).toFixed(1)}" r="3.5" fill="${color}"><title>${escapeXml(
          `${s.name}: ${tickLabel(p.x)} → ${tickLabel(p.y)}`,
        )}</title></circle>`,
      );
    }
    const ly = margin.top + 10 + i * 18;
    const lx = margin.left + plotW + 12;
    out.push(
      `<line x1="${lx}" y1="${ly}" x2="${lx + 22}" y2="${ly}" stroke="${color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="6 4"' : ""}/>`,
      `<text x="${lx + 28}" y="${ly}" dominant-baseline="middle">${escapeXml(s.name)}</text>`,
    );
  });
  out.push("</svg>");
  return out.join("\n") + "\n";
}
