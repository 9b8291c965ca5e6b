export default {
  build: { target: 'es2022' },
  optimizeDeps: { exclude: ['lull-web'] },
};
