package {{ cookiecutter.application_id }};

import android.Manifest;
import android.content.Intent;
import android.content.pm.PackageManager;
import android.graphics.Bitmap;
import android.graphics.BitmapFactory;
import android.graphics.Canvas;
import android.graphics.Paint;
import android.graphics.Rect;
import android.os.Build;
import android.os.Bundle;
import android.os.SystemClock;
import android.util.Log;
import android.widget.ImageView;
import android.widget.TextView;
import androidx.activity.ComponentActivity;
import androidx.camera.core.CameraSelector;
import androidx.camera.core.ImageAnalysis;
import androidx.camera.core.ImageProxy;
import androidx.camera.lifecycle.ProcessCameraProvider;
import androidx.core.content.ContextCompat;
import com.google.common.util.concurrent.ListenableFuture;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * Classifies the bundled sample image and live camera frames with the packaged model: NNAPI when the
 * device can run it, otherwise (below API 29, or when the NNAPI model fails to load or run) the CPU model,
 * with the reason logged and shown.
 *
 * <p>In-app benchmark (the contract `invoke deploy` uses):
 * {@code am start -S -W -n <application id>/.MainActivity --ez benchmark true --ei iters 200 --ei warmup 5
 * --es backend nnapi} runs warm-up + timed iterations on the bundled input and logs exactly one line
 * {@code TORCHDROID_BENCH {...json...}} with the tag {@code torchdroid}.
 */
public class MainActivity extends ComponentActivity {
    private static final String TAG = AppConfig.BENCH_TAG;
    private static final int CAMERA_REQUEST = 1;

    /** Every model call runs on this one thread: model, buffers and frame bitmap are never shared. */
    private final ExecutorService worker = Executors.newSingleThreadExecutor();
    private final Paint paint = new Paint(Paint.FILTER_BITMAP_FLAG);

    private TextView backendView;
    private TextView statusView;
    private TextView sampleView;
    private TextView cameraView;
    private ImageView sampleImage;

    // worker-thread state
    private ModelRunner runner;
    private AssetCache assetCache;
    private byte[] lut;
    private String[] labels;
    private Bitmap frame;
    private Canvas frameCanvas;
    private Rect frameRect;

    private ProcessCameraProvider cameraProvider;

    @Override
    protected void onCreate(Bundle savedInstanceState) {
        super.onCreate(savedInstanceState);
        setContentView(R.layout.activity_main);
        backendView = findViewById(R.id.backend);
        statusView = findViewById(R.id.status);
        sampleView = findViewById(R.id.sample_result);
        cameraView = findViewById(R.id.camera_result);
        sampleImage = findViewById(R.id.sample_image);

        final Intent intent = getIntent();
        if (intent != null && intent.getBooleanExtra("benchmark", false)) {
            final int iters = intent.getIntExtra("iters", 200);
            final int warmup = intent.getIntExtra("warmup", 5);
            final String backend = intent.getStringExtra("backend");
            statusView.setText(String.format(Locale.US, "benchmark: %d warm-up + %d iterations…", warmup, iters));
            worker.execute(() -> runBenchmark(backend == null ? {{ cookiecutter.default_backend | java_string }} : backend, warmup, iters));
            return;
        }
        worker.execute(this::classifySample);
        startCameraWhenAllowed();
    }

    @Override
    protected void onDestroy() {
        super.onDestroy();
        if (cameraProvider != null) {
            cameraProvider.unbindAll();
        }
        worker.execute(() -> {
            if (runner != null) {
                runner.close();
            }
        });
        worker.shutdown();
    }

    // ----------------------------------------------------------------------------------- models

    /** Load the requested backend (NNAPI falls back to the CPU model, see ModelRunner) and say which runs. */
    private void open(String requested) throws IOException {
        if (runner == null) {
            runner = new ModelRunner(assets()::path, lut, Build.VERSION.SDK_INT);
        }
        runner.open(requested, sampleFrame());
        if (runner.fallbackReason != null) {
            Log.w(TAG, "using the CPU model instead of NNAPI: " + runner.fallbackReason);
        }
        showBackend();
    }

    private void loadCommon() throws IOException {
        if (labels == null) {
            labels = readLabels();
        }
        if (lut == null && "uint8_lut".equals(AppConfig.INPUT_MODE)) {
            lut = assets().read(AppConfig.LUT_ASSET);
        }
        if (frame == null) {
            final int size = AppConfig.INPUT_SIZE;
            frame = Bitmap.createBitmap(size, size, Bitmap.Config.ARGB_8888);
            frameCanvas = new Canvas(frame);
            frameRect = new Rect(0, 0, size, size);
        }
    }

    /** Run the current model on {@code input}; if NNAPI fails at run time, ModelRunner switches to the CPU model. */
    private float[] classify(Bitmap input, long[] nanos) throws IOException {
        final String before = runner.classifier.backend;
        final float[] scores = runner.classify(input, nanos);
        if (!before.equals(runner.classifier.backend)) {
            Log.w(TAG, "falling back to the CPU model: " + runner.fallbackReason);
            showBackend();
        }
        return scores;
    }

    // ----------------------------------------------------------------------------------- sample + camera

    private void classifySample() {
        try {
            loadCommon();
            final Bitmap sample = readSample();
            runOnUiThread(() -> sampleImage.setImageBitmap(sample));
            open({{ cookiecutter.default_backend | java_string }});
            final long[] nanos = new long[1];
            final float[] scores = classify(toFrame(sample, 0), nanos);
            final String text = describe(scores, nanos[0]);
            runOnUiThread(() -> sampleView.setText(text));
        } catch (Throwable t) {
            Log.e(TAG, "could not classify the sample image", t);
            runOnUiThread(() -> statusView.setText("error: " + t));
        }
    }

    private void startCameraWhenAllowed() {
        if (Build.VERSION.SDK_INT >= 23
                && checkSelfPermission(Manifest.permission.CAMERA) != PackageManager.PERMISSION_GRANTED) {
            requestPermissions(new String[] {Manifest.permission.CAMERA}, CAMERA_REQUEST);
        } else {
            startCamera();
        }
    }

    @Override
    public void onRequestPermissionsResult(int requestCode, String[] permissions, int[] grantResults) {
        super.onRequestPermissionsResult(requestCode, permissions, grantResults);
        if (requestCode != CAMERA_REQUEST) {
            return;
        }
        if (grantResults.length > 0 && grantResults[0] == PackageManager.PERMISSION_GRANTED) {
            startCamera();
        } else {
            cameraView.setText("camera permission denied: only the sample image is classified");
        }
    }

    private void startCamera() {
        final ListenableFuture<ProcessCameraProvider> future = ProcessCameraProvider.getInstance(this);
        future.addListener(() -> {
            try {
                cameraProvider = future.get();
                final ImageAnalysis analysis = new ImageAnalysis.Builder()
                        .setBackpressureStrategy(ImageAnalysis.STRATEGY_KEEP_ONLY_LATEST)
                        .setOutputImageFormat(ImageAnalysis.OUTPUT_IMAGE_FORMAT_RGBA_8888)
                        .build();
                analysis.setAnalyzer(worker, this::analyze);
                cameraProvider.unbindAll();
                cameraProvider.bindToLifecycle(this, CameraSelector.DEFAULT_BACK_CAMERA, analysis);
            } catch (Exception e) {
                Log.e(TAG, "camera unavailable", e);
                cameraView.setText("camera unavailable: " + e);
            }
        }, ContextCompat.getMainExecutor(this));
    }

    /** CameraX analyzer (runs on the worker thread, like every other model call). */
    private void analyze(ImageProxy image) {
        try {
            if (runner == null || runner.classifier == null) {
                return; // still loading
            }
            final Bitmap bitmap = image.toBitmap();
            final long[] nanos = new long[1];
            final float[] scores = classify(toFrame(bitmap, image.getImageInfo().getRotationDegrees()), nanos);
            final String text = describe(scores, nanos[0]);
            runOnUiThread(() -> cameraView.setText(text));
        } catch (Throwable t) {
            Log.e(TAG, "camera frame failed", t);
            runOnUiThread(() -> cameraView.setText("error: " + t));
        } finally {
            image.close();
        }
    }

    // ----------------------------------------------------------------------------------- benchmark

    private void runBenchmark(String requested, int warmup, int iters) {
        String error = null;
        BenchStats.Summary summary = null;
        String used = requested;
        try {
            if (iters < 1 || warmup < 0) {
                throw new IllegalArgumentException("iters must be >= 1 and warmup >= 0 (got " + iters + ", " + warmup + ")");
            }
            loadCommon();
            open(requested);
            final Classifier classifier = runner.classifier;
            used = classifier.backend;
            classifier.fill(sampleFrame());
            progress(requested, "loaded", 0, iters);
            for (int i = 0; i < warmup; i++) {
                classifier.run();
            }
            progress(requested, "warmup", warmup, warmup);
            final long[] nanos = new long[iters];
            final int every = Math.max(1, iters / 10);
            for (int i = 0; i < iters; i++) {
                final long t0 = SystemClock.elapsedRealtimeNanos();
                classifier.run();
                nanos[i] = SystemClock.elapsedRealtimeNanos() - t0;
                if ((i + 1) % every == 0) {
                    progress(requested, "iter", i + 1, iters); // outside the timed call
                }
            }
            summary = BenchStats.summarize(nanos);
        } catch (Throwable t) {
            error = t.toString();
            Log.e(TAG, "benchmark failed", t);
        }
        final String fallbackReason = runner == null ? null : runner.fallbackReason;
        final String line = BenchStats.line(AppConfig.VARIANT, used, requested, fallbackReason != null,
                fallbackReason, iters, warmup, summary, error);
        Log.i(TAG, line);
        final String title = "benchmark: " + AppConfig.VARIANT + " on " + used.toUpperCase(Locale.US)
                + (fallbackReason == null ? "" : " (fallback: " + fallbackReason + ")");
        runOnUiThread(() -> {
            backendView.setText(title);
            statusView.setText(line);
        });
    }

    /**
     * One progress line (prefix "TORCHDROID_PROGRESS ", toolchain.records.APP_PROGRESS_PREFIX): deploy waits on
     * these instead of a fixed timeout.
     */
    private static void progress(String backend, String stage, int done, int of) {
        Log.i(TAG, String.format(Locale.US, "TORCHDROID_PROGRESS {\"backend\": \"%s\", \"stage\": \"%s\", "
                + "\"done\": %d, \"of\": %d}", backend, stage, done, of));
    }

    // ----------------------------------------------------------------------------------- helpers

    private void showBackend() {
        final String backend = runner.classifier.backend;
        final String reason = runner.fallbackReason;
        final String text = AppConfig.VARIANT + " on " + backend.toUpperCase(Locale.US)
                + (reason == null ? "" : " (fallback: " + reason + ")");
        runOnUiThread(() -> backendView.setText(text));
    }

    /** Centre-crop {@code src} to a square, rotate it upright and scale it into the reused input frame. */
    private Bitmap toFrame(Bitmap src, int rotationDegrees) {
        final int w = src.getWidth();
        final int h = src.getHeight();
        final int side = Math.min(w, h);
        final int left = (w - side) / 2;
        final int top = (h - side) / 2;
        final float centre = AppConfig.INPUT_SIZE / 2f;
        frameCanvas.save();
        frameCanvas.rotate(rotationDegrees, centre, centre);
        frameCanvas.drawBitmap(src, new Rect(left, top, left + side, top + side), frameRect, paint);
        frameCanvas.restore();
        return frame;
    }

    private Bitmap sampleFrame() throws IOException {
        return toFrame(readSample(), 0);
    }

    private String describe(float[] scores, long nanos) {
        return TopK.describe(scores, labels, nanos, runner.classifier.backend);
    }

    /** Models are copied from assets to the files directory once (again only after an app update). */
    private AssetCache assets() {
        if (assetCache == null) {
            final String apkStamp = String.valueOf(new File(getPackageCodePath()).lastModified());
            assetCache = new AssetCache(getFilesDir(), apkStamp, getAssets()::open);
        }
        return assetCache;
    }

    private String[] readLabels() throws IOException {
        final List<String> out = new ArrayList<>();
        try (BufferedReader r = new BufferedReader(
                new InputStreamReader(getAssets().open(AppConfig.LABELS_ASSET), StandardCharsets.UTF_8))) {
            String line;
            while ((line = r.readLine()) != null) {
                out.add(line);
            }
        }
        return out.toArray(new String[0]);
    }

    private Bitmap readSample() throws IOException {
        try (InputStream in = getAssets().open(AppConfig.SAMPLE_ASSET)) {
            final Bitmap bitmap = BitmapFactory.decodeStream(in);
            if (bitmap == null) {
                throw new IOException("cannot decode " + AppConfig.SAMPLE_ASSET);
            }
            return bitmap;
        }
    }
}
