from glob import glob

from setuptools import find_packages, setup

package_name = 'manip_core'

setup(
    name=package_name,
    version='0.1.0',
    # The package directory itself is listed explicitly so that it is installed even before it has
    # an __init__.py; find_packages adds any subpackages.
    packages=sorted({package_name, *find_packages(exclude=['test', 'test.*'])}),
    package_data={package_name: ['robots/*.urdf', 'robots/*.kinematic.json', 'ros/*.xml']},
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
        # Same relative path as in the source folder: $(find-pkg-share manip_core)/manip_core/robots/ur5.urdf
        ('share/' + package_name + '/manip_core/robots', glob('manip_core/robots/*.urdf')
         + glob('manip_core/robots/*.kinematic.json')),
    ],
    install_requires=['setuptools'],
    zip_safe=False,
    maintainer='manip maintainers',
    maintainer_email='maintainers@manip-robotics.org',
    description='Robot models, kinematics (PoE screw axes, FK/IK, Jacobians) and the manip command-line tools.',
    license='Apache-2.0',
    tests_require=['pytest'],
    entry_points={
        'console_scripts': [
            'manip-model = manip_core.cli:main',
            'manip-launch = manip_core.launcher:main',
            'model_server = manip_core:model_server_main',
            'state_publisher = manip_core:state_publisher_main',
            'analysis_markers = manip_core:analysis_markers_main',
            'manip-bag = manip_core.bag_cli:main',
        ],
    },
)
