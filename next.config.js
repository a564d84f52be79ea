/** @type {import('next').NextConfig} */
const nextConfig = {
  // Plugin calls spawn processes and read the plugin root: keep those modules out of the bundle.
  serverExternalPackages: [],
  typescript: { ignoreBuildErrors: false },
};

export default nextConfig;
