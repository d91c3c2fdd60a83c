package org.pytorch.executorch;

import java.io.File;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Working fake of executorch-android's Module: {@code load} refuses a path that is not a readable file the way
 * the real one does (ExecuTorchRuntime.validateFilePath: IllegalArgumentException), {@code forward} returns an
 * array of outputs (one [1, 1] float tensor) and remembers its inputs.
 *
 * <p>Failures chosen by the model path, as in the pytorch_android fake: {@code fail-load} cannot be loaded,
 * {@code fail-run-after-N} runs N times, then throws (ExecutorchRuntimeException is a RuntimeException).
 * {@link #live} counts loaded, not yet destroyed modules.
 */
public class Module {
    private static final Pattern FAIL_RUN = Pattern.compile("fail-run-after-(\\d+)");

    public static EValue[] lastInputs;
    public static int live;

    private final String path;
    private int runs;
    private boolean destroyed;

    private Module(String path) {
        this.path = path;
    }

    public static Module load(String modelPath) {
        return load(modelPath, 0, 0);
    }

    public static Module load(String modelPath, int loadMode) {
        return load(modelPath, loadMode, 0);
    }

    public static Module load(String modelPath, int loadMode, int numThreads) {
        if (modelPath == null) {
            throw new IllegalArgumentException("Cannot load model path: path is null");
        }
        final File f = new File(modelPath);
        if (!f.exists() || !f.isFile() || !f.canRead()) {
            throw new IllegalArgumentException("Cannot load model path: path does not exist or is not a readable file: "
                    + modelPath);
        }
        if (modelPath.contains("fail-load")) {
            throw new RuntimeException("fake: cannot load " + modelPath);
        }
        live++;
        return new Module(modelPath);
    }

    public EValue[] forward(EValue... inputs) {
        if (destroyed) {
            throw new IllegalStateException("fake: forward on a destroyed module");
        }
        runs++;
        final Matcher m = FAIL_RUN.matcher(path);
        if (m.find() && runs > Integer.parseInt(m.group(1))) {
            throw new RuntimeException("fake: " + path + " failed on run " + runs);
        }
        lastInputs = inputs.clone();
        return new EValue[] {EValue.from(Tensor.fromBlob(Tensor.allocateFloatBuffer(1), new long[] {1, 1}))};
    }

    public EValue[] execute(String methodName, EValue... inputs) {
        if (!"forward".equals(methodName)) {
            throw new RuntimeException("fake: no method " + methodName);
        }
        return forward(inputs);
    }

    public void destroy() {
        if (!destroyed) {
            destroyed = true;
            live--;
        }
    }
}
