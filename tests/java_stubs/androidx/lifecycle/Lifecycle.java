package androidx.lifecycle;
public abstract class Lifecycle {
}
