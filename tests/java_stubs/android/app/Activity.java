package android.app;
import android.content.Context;
import android.content.Intent;
import android.content.res.AssetManager;
import android.os.Bundle;
import android.view.View;
import java.io.File;
public class Activity extends Context {
    protected void onCreate(Bundle savedInstanceState) { throw new RuntimeException("Stub!"); }
    protected void onDestroy() { throw new RuntimeException("Stub!"); }
    public void setContentView(int layoutResID) { throw new RuntimeException("Stub!"); }
    public <T extends View> T findViewById(int id) { throw new RuntimeException("Stub!"); }
    public Intent getIntent() { throw new RuntimeException("Stub!"); }
    public final void runOnUiThread(Runnable action) { throw new RuntimeException("Stub!"); }
    public final void requestPermissions(String[] permissions, int requestCode) { throw new RuntimeException("Stub!"); }
    public void onRequestPermissionsResult(int requestCode, String[] permissions, int[] grantResults) { throw new RuntimeException("Stub!"); }
    @Override public AssetManager getAssets() { throw new RuntimeException("Stub!"); }
    @Override public File getFilesDir() { throw new RuntimeException("Stub!"); }
    @Override public String getPackageCodePath() { throw new RuntimeException("Stub!"); }
    @Override public int checkSelfPermission(String permission) { throw new RuntimeException("Stub!"); }
}
