package {{ cookiecutter.application_id }};

import java.util.Locale;

/** The top classes of one inference and the text the app shows for them (plain Java, tested on the JVM). */
final class TopK {
    private TopK() {}

    /** Indices of the {@code k} highest scores, highest first; on ties the lower index first. */
    static int[] indices(float[] scores, int k) {
        final int n = Math.min(k, scores.length);
        final int[] top = new int[n];
        final boolean[] taken = new boolean[scores.length];
        for (int j = 0; j < n; j++) {
            int best = -1;
            for (int i = 0; i < scores.length; i++) {
                if (!taken[i] && (best < 0 || scores[i] > scores[best])) {
                    best = i;
                }
            }
            taken[best] = true;
            top[j] = best;
        }
        return top;
    }

    /** "12.3 ms on NNAPI" and one "probability  label" line per top-5 class (softmax over all scores). */
    static String describe(float[] scores, String[] labels, long nanos, String backend) {
        final int[] top = indices(scores, 5);
        final double max = scores[top[0]];
        double sum = 0;
        for (float s : scores) {
            sum += Math.exp(s - max);
        }
        final StringBuilder b = new StringBuilder(String.format(Locale.US, "%.1f ms on %s\n", nanos / 1e6,
                backend.toUpperCase(Locale.US)));
        for (int idx : top) {
            final String label = idx < labels.length ? labels[idx] : ("class " + idx);
            b.append(String.format(Locale.US, "%5.1f%%  %s\n", 100.0 * Math.exp(scores[idx] - max) / sum, label));
        }
        return b.toString();
    }
}
