package androidx.camera.core;
public final class CameraSelector {
    public static final CameraSelector DEFAULT_BACK_CAMERA = null;
    public static final CameraSelector DEFAULT_FRONT_CAMERA = null;
}
