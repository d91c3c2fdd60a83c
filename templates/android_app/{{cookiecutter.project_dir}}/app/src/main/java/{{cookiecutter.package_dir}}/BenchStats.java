package {{ cookiecutter.application_id }};

import java.util.Arrays;
import java.util.Locale;

/** Latency statistics and the one machine-readable logcat line of the in-app benchmark. */
final class BenchStats {
    private BenchStats() {}

    final static class Summary {
        final double medianMs;
        final double p90Ms;
        final double minMs;
        final double meanMs;

        Summary(double medianMs, double p90Ms, double minMs, double meanMs) {
            this.medianMs = medianMs;
            this.p90Ms = p90Ms;
            this.minMs = minMs;
            this.meanMs = meanMs;
        }
    }

    /** Median, 90th percentile (nearest rank, as toolchain/stats.py defines it), minimum and mean of per-iteration times in nanoseconds. */
    static Summary summarize(long[] nanos) {
        if (nanos.length == 0) {
            throw new IllegalArgumentException("no timed iterations");
        }
        final long[] sorted = nanos.clone();
        Arrays.sort(sorted);
        final int n = sorted.length;
        final double median = n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0;
        final int rank = (int) Math.ceil(0.9 * n) - 1;
        double sum = 0;
        for (long v : sorted) {
            sum += v;
        }
        return new Summary(median / 1e6, sorted[Math.max(rank, 0)] / 1e6, sorted[0] / 1e6, sum / n / 1e6);
    }

    /** The line `invoke deploy` parses: prefix + one JSON object (keys fixed by the torchdroid contract). */
    static String line(String variant, String backend, String requested, boolean fellBack, String fallbackReason,
                       int iters, int warmup, Summary s, String error) {
        final StringBuilder b = new StringBuilder(AppConfig.BENCH_PREFIX);
        b.append('{');
        b.append("\"variant\": ").append(json(variant));
        b.append(", \"backend\": ").append(json(backend));
        b.append(", \"requested_backend\": ").append(json(requested));
        b.append(", \"fell_back\": ").append(fellBack);
        b.append(", \"fallback_reason\": ").append(json(fallbackReason));
        b.append(", \"iters\": ").append(iters);
        b.append(", \"warmup\": ").append(warmup);
        b.append(", \"median_ms\": ").append(s == null ? "null" : number(s.medianMs));
        b.append(", \"p90_ms\": ").append(s == null ? "null" : number(s.p90Ms));
        b.append(", \"min_ms\": ").append(s == null ? "null" : number(s.minMs));
        b.append(", \"mean_ms\": ").append(s == null ? "null" : number(s.meanMs));
        b.append(", \"error\": ").append(json(error));
        b.append('}');
        return b.toString();
    }

    private static String number(double v) {
        return String.format(Locale.US, "%.4f", v);
    }

    /** A JSON string literal (or null). */
    static String json(String s) {
        if (s == null) {
            return "null";
        }
        final StringBuilder b = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            final char c = s.charAt(i);
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        b.append(String.format(Locale.US, "\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
            }
        }
        return b.append('"').toString();
    }
}
