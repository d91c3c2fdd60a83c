package {{ cookiecutter.application_id }};

import android.graphics.Bitmap;
import java.io.IOException;

/**
 * Which model runs, and the NNAPI-to-CPU fallback: NNAPI when the device can run it; the CPU model below
 * API {@link AppConfig#NNAPI_MIN_SDK}, when the app has no NNAPI model, or when the NNAPI model fails to load,
 * to run its first inference, or later at run time. {@link #fallbackReason} says why (null: no fallback).
 *
 * <p>Plain Java (no Activity): the caller passes the device's API level and how to get an asset's file.
 */
final class ModelRunner {
    /** Path of an asset copied to the app's files directory. */
    interface AssetFiles {
        String path(String asset) throws IOException;
    }

    private final AssetFiles files;
    private final byte[] lut;
    private final int sdkInt;

    /** The model in use; null before {@link #open}. */
    Classifier classifier;
    /** Why the CPU model runs although NNAPI was asked for; null when there was no fallback. */
    String fallbackReason;

    ModelRunner(AssetFiles files, byte[] lut, int sdkInt) {
        this.files = files;
        this.lut = lut;
        this.sdkInt = sdkInt;
    }

    /**
     * Load the {@code requested} backend ("cpu" or "nnapi"). An NNAPI model also runs {@code probe} once here:
     * NNAPI compiles the model on its first run, so a model the device cannot run fails now, not mid-stream.
     */
    void open(String requested, Bitmap probe) throws IOException {
        close();
        fallbackReason = null;
        if ("nnapi".equals(requested)) {
            if (AppConfig.MODEL_NNAPI_ASSET.isEmpty()) {
                fallbackReason = "this app has no NNAPI model for " + AppConfig.VARIANT;
            } else if (sdkInt < AppConfig.NNAPI_MIN_SDK) {
                fallbackReason = "Android API " + sdkInt + " < " + AppConfig.NNAPI_MIN_SDK
                        + " (PyTorch's NNAPI needs Android 10)";
            } else {
                Classifier nnapi = null;
                try {
                    nnapi = new Classifier("nnapi", files.path(AppConfig.MODEL_NNAPI_ASSET), lut);
                    nnapi.fill(probe);
                    nnapi.run();
                    classifier = nnapi;
                    return;
                } catch (Throwable t) {
                    fallbackReason = "the NNAPI model failed to load or run: " + t;
                    if (nnapi != null) {
                        nnapi.close();
                    }
                }
            }
        } else if (!"cpu".equals(requested)) {
            throw new IllegalArgumentException("backend must be cpu or nnapi (got " + requested + ")");
        }
        classifier = new Classifier("cpu", files.path(AppConfig.MODEL_CPU_ASSET), lut);
    }

    /**
     * Fill the reused input from {@code input} and run the model; {@code nanos[0]} gets the inference time.
     * If the NNAPI model fails at run time, switch to the CPU model once (the caller sees the new backend and
     * {@link #fallbackReason}) and run that.
     */
    float[] classify(Bitmap input, long[] nanos) throws IOException {
        for (int attempt = 0; ; attempt++) {
            try {
                classifier.fill(input);
                final long t0 = System.nanoTime();
                final float[] scores = classifier.run();
                nanos[0] = System.nanoTime() - t0;
                return scores;
            } catch (RuntimeException e) {
                if (!"nnapi".equals(classifier.backend) || attempt > 0) {
                    throw e;
                }
                fallbackReason = "the NNAPI model failed at run time: " + e;
                classifier.close();
                classifier = new Classifier("cpu", files.path(AppConfig.MODEL_CPU_ASSET), lut);
            }
        }
    }

    void close() {
        if (classifier != null) {
            classifier.close();
            classifier = null;
        }
    }
}
