package org.pytorch;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Working fake: remembers the inputs of the last forward (so a test can inspect exactly what the app fed
 * the model) and returns a [1, 1] float tensor.
 *
 * <p>Failures the way pytorch_android reports them (a RuntimeException from native code), chosen by the model
 * path: a path containing {@code fail-load} cannot be loaded; {@code fail-run-after-N} runs N times, then throws.
 * {@link #live} counts loaded, not yet destroyed modules (a fallback must not leak the failed one).
 */
public final class Module {
    private static final Pattern FAIL_RUN = Pattern.compile("fail-run-after-(\\d+)");

    public static IValue[] lastInputs;
    public static int live;

    private final String path;
    private int runs;

    private Module(String path) {
        this.path = path;
    }

    public static Module load(String modelPath) {
        if (modelPath.contains("fail-load")) {
            throw new RuntimeException("fake: cannot load " + modelPath);
        }
        live++;
        return new Module(modelPath);
    }

    public IValue forward(IValue... inputs) {
        runs++;
        final Matcher m = FAIL_RUN.matcher(path);
        if (m.find() && runs > Integer.parseInt(m.group(1))) {
            throw new RuntimeException("fake: " + path + " failed on run " + runs);
        }
        lastInputs = inputs.clone();
        return IValue.from(Tensor.fromBlob(Tensor.allocateFloatBuffer(1), new long[] {1, 1}));
    }

    public void destroy() {
        live--;
    }
}
