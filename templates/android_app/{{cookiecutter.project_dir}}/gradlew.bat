@rem Gradle wrapper launcher written by torchdroid (`gradle wrapper` replaces it with Gradle's own).
@if "%DEBUG%"=="" @echo off
setlocal
set APP_HOME=%~dp0
set WRAPPER_JAR=%APP_HOME%gradle\wrapper\gradle-wrapper.jar
if exist "%WRAPPER_JAR%" goto findJava
echo ERROR: %WRAPPER_JAR% is missing. 1>&2
echo   Install Gradle and run "gradle wrapper" in %APP_HOME%, or open the project in Android Studio. 1>&2
exit /b 1
:findJava
set JAVA_EXE=java.exe
if defined JAVA_HOME set JAVA_EXE=%JAVA_HOME%\bin\java.exe
"%JAVA_EXE%" %DEFAULT_JVM_OPTS% %JAVA_OPTS% %GRADLE_OPTS% "-Dorg.gradle.appname=gradlew" -classpath "%WRAPPER_JAR%" org.gradle.wrapper.GradleWrapperMain %*
exit /b %ERRORLEVEL%
