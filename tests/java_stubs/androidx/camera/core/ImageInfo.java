package androidx.camera.core;
public interface ImageInfo {
    long getTimestamp();
    int getRotationDegrees();
}
